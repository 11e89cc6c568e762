import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { RedisCustomerStore } from '../../src/customers/redis-customer-store.js';
import { RedisKeyStore } from '../../src/keys/redis-key-store.js';
import { connected, useRedisClient } from '../support/helpers.js';
import { customerStoreContract } from './customer-store.contract.js';

const redis = useRedisClient();

// A fresh prefix is a fresh, empty store on the file's own redis-server. A key store comes first
// on the same client, as the gateway makes them: the two share one write script.
customerStoreContract('RedisCustomerStore', async () => {
  const prefix = `cs${randomUUID().slice(0, 8)}:`;
  new RedisKeyStore(redis(), prefix);
  return { store: new RedisCustomerStore(redis(), prefix), cleanup: async () => {} };
});

describe('RedisCustomerStore in Redis', () => {
  // What a list or a name search walks: a deleted customer must leave them, or they grow forever.
  it('indexes a live customer by creation, name and externalId, and keeps only its change once deleted', async () => {
    const prefix = `cs${randomUUID().slice(0, 8)}:`;
    const store = new RedisCustomerStore(redis(), prefix);
    const base = `${prefix}{customers}`;
    const createdAt = '2026-11-01T00:00:00.000Z';
    const record = {
      id: 'cus_redis',
      name: 'Acme Corp',
      plan: 'pro' as const,
      billing: { anchorDay: 1, timeZone: 'UTC' },
    };
    await store.insert({ ...record, externalId: 'crm-1', createdAt });
    const contents = async () => ({
      created: await redis().zrange(`${base}:created`, '0', '-1'),
      name: await redis().zrange(`${base}:name`, '0', '-1'),
      changed: await redis().zrange(`${base}:changed`, '0', '-1', 'WITHSCORES'),
      unique: await redis().hgetall(`${base}:unique`),
    });
    expect(await contents()).toEqual({
      created: [`${createdAt} cus_redis`],
      name: ['acme corp cus_redis'],
      changed: [],
      unique: { 'crm-1': 'cus_redis' },
    });
    const renamedAt = new Date('2026-11-02T00:00:00.000Z');
    await store.update('cus_redis', { name: 'Zeta', externalId: 'crm-2' }, renamedAt);
    expect(await contents()).toEqual({
      created: [`${createdAt} cus_redis`],
      name: ['zeta cus_redis'],
      changed: ['cus_redis', String(renamedAt.getTime())],
      unique: { 'crm-2': 'cus_redis' },
    });
    const deletedAt = new Date('2026-11-03T00:00:00.000Z');
    expect(await store.delete('cus_redis', deletedAt)).toBe(true);
    expect(await contents()).toEqual({
      created: [],
      name: [],
      changed: ['cus_redis', String(deletedAt.getTime())],
      unique: {},
    });
  });

  it('says it is Redis, and its ping fails while its Redis cannot be reached', async () => {
    const prefix = `cs${randomUUID().slice(0, 8)}:`;
    const away = await connected(redis().duplicate());
    away.on('error', () => {});
    const store = new RedisCustomerStore(away, prefix);
    expect(store.kind).toBe('redis');
    await store.ping();
    away.disconnect();
    await expect(store.ping()).rejects.toThrow();
  });
});
