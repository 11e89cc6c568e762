import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { RedisPortalSessionStore } from '../../src/portal/redis-session-store.js';
import { MemoryPortalSessionStore, newSecret, secretName } from '../../src/portal/session-store.js';
import { useRedisClient } from '../support/helpers.js';
import { portalSessionStoreContract } from './session-store.contract.js';

const redis = useRedisClient();

portalSessionStoreContract('MemoryPortalSessionStore', async () => new MemoryPortalSessionStore());
portalSessionStoreContract('RedisPortalSessionStore', async () => {
  return new RedisPortalSessionStore(redis(), `ps${randomUUID().slice(0, 8)}:`);
});

it('Redis keeps only a hash of the secret, expiring when the link does', async () => {
  const prefix = `ps${randomUUID().slice(0, 8)}:`;
  const store = new RedisPortalSessionStore(redis(), prefix);
  const secret = newSecret();
  const expiresAt = Date.now() + 300_000;
  await store.putLink(secret, 'cus_a', expiresAt);
  const keys = await redis().keys(`${prefix}*`);
  expect(keys).toEqual([`${prefix}portal:link:${secretName(secret)}`]);
  expect(keys.join()).not.toContain(secret);
  expect(Math.abs((await redis().pexpiretime(keys[0] as string)) - expiresAt)).toBeLessThanOrEqual(1);
});
