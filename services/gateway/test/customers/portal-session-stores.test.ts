import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import {
  MemoryPortalSessionStore,
  newSecret,
  secretName,
  TRACE_LINGER_MS,
} from '../../src/customers/portal-session-store.js';
import { RedisPortalSessionStore } from '../../src/customers/redis-portal-session-store.js';
import { useRedisClient } from '../support/helpers.js';
import { IDLE_MS, portalSessionStoreContract } from './portal-session-store.contract.js';

const redis = useRedisClient();

portalSessionStoreContract('MemoryPortalSessionStore', async (timing) => new MemoryPortalSessionStore(timing));
portalSessionStoreContract('RedisPortalSessionStore', async (timing) => {
  return new RedisPortalSessionStore(redis(), `ps${randomUUID().slice(0, 8)}:`, timing);
});

it('memory gives no link at the very millisecond of its end, and gives it a millisecond before', async () => {
  const now = Date.now();
  const store = new MemoryPortalSessionStore({ now: () => now, idleMs: IDLE_MS });
  const [ended, live] = [newSecret(), newSecret()];
  // The ended link last: a put sweeps what has ended before it.
  await store.putLink(live, 'cus_b', now + 1);
  await store.putLink(ended, 'cus_a', now);
  expect(await store.takeLink(ended)).toBeNull();
  expect(await store.takeLink(live)).toBe('cus_b');
});

it('Redis keeps only a hash of the secret, expiring when the link does', async () => {
  const prefix = `ps${randomUUID().slice(0, 8)}:`;
  const store = new RedisPortalSessionStore(redis(), prefix, { now: Date.now, idleMs: IDLE_MS });
  const secret = newSecret();
  const expiresAt = Date.now() + 300_000;
  await store.putLink(secret, 'cus_a', expiresAt);
  const keys = await redis().keys(`${prefix}*`);
  expect(keys).toEqual([`${prefix}portal:link:${secretName(secret)}`]);
  expect(keys.join()).not.toContain(secret);
  expect(Math.abs((await redis().pexpiretime(keys[0] as string)) - expiresAt)).toBeLessThanOrEqual(1);
});

it('Redis expires a session at its idle end, and each use moves that on', async () => {
  const prefix = `ps${randomUUID().slice(0, 8)}:`;
  let now = Date.now();
  const store = new RedisPortalSessionStore(redis(), prefix, { now: () => now, idleMs: IDLE_MS });
  const secret = newSecret();
  await store.putSession(secret, { customerId: 'cus_a', csrfToken: 'c', expiresAt: now + 3_600_000 });
  const key = `${prefix}portal:session:${secretName(secret)}`;
  // The session and its trace, both named by the secret's hash only.
  expect((await redis().keys(`${prefix}*`)).sort()).toEqual([key, `${prefix}portal:trace:${secretName(secret)}`]);
  expect(await redis().pexpiretime(key)).toBe(now + IDLE_MS);
  now += 60_000;
  await store.getSession(secret);
  expect(await redis().pexpiretime(key)).toBe(now + IDLE_MS);
  // The trace lasts to an hour past the session's end, and sign-out keeps that end.
  const trace = `${prefix}portal:trace:${secretName(secret)}`;
  const traceEnds = await redis().pexpiretime(trace);
  expect(traceEnds).toBe(now - 60_000 + 3_600_000 + TRACE_LINGER_MS);
  await store.endSession(secret);
  expect(await redis().exists(key)).toBe(0);
  expect(await redis().pexpiretime(trace)).toBe(traceEnds);
});
