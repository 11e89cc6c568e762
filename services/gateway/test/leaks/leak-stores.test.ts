import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { MemoryLeakStore, RedisLeakStore } from '../../src/leaks/leak-store.js';
import { MemoryReplayGuard, RedisReplayGuard } from '../../src/leaks/replay-guard.js';
import { useRedisClient } from '../support/helpers.js';
import { leakStoreContract, replayGuardContract } from './leak-stores.contract.js';

const redis = useRedisClient();
const prefix = () => `lk${randomUUID().slice(0, 8)}:`;

leakStoreContract('MemoryLeakStore', async () => new MemoryLeakStore(Date.now));
leakStoreContract('RedisLeakStore', async () => new RedisLeakStore(redis(), prefix()));
replayGuardContract('MemoryReplayGuard', async () => new MemoryReplayGuard(Date.now));
replayGuardContract('RedisReplayGuard', async () => new RedisReplayGuard(redis(), prefix()));

it('MemoryReplayGuard takes a signature again once its window has passed on the clock it is given', async () => {
  let at = Date.now();
  const guard = new MemoryReplayGuard(() => at);
  await guard.firstSeen('sig', 60_000);
  at += 59_999;
  expect(await guard.firstSeen('sig', 60_000)).toBe(false);
  at += 1;
  expect(await guard.firstSeen('sig', 60_000)).toBe(true);
});

it('RedisReplayGuard keeps the signature no longer than the window', async () => {
  const p = prefix();
  await new RedisReplayGuard(redis(), p).firstSeen('sig', 60_000);
  const [key] = await redis().keys(`${p}leak-seen:*`);
  expect(key).not.toContain('sig');
  const ttl = await redis().pttl(key ?? '');
  expect(ttl).toBeGreaterThan(0);
  expect(ttl).toBeLessThanOrEqual(60_000);
});
