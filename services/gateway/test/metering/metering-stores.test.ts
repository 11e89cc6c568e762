import { randomUUID } from 'node:crypto';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import { afterAll, beforeAll } from 'vitest';
import { MemoryMeteringStore } from '../../src/metering/metering-store.js';
import { RedisMeteringStore } from '../../src/metering/redis-metering-store.js';
import { DAY_MS } from '../../src/usage/usage-history.js';
import { connected, redisClient } from '../support/helpers.js';
import { meteringStoreContract } from './metering-store.contract.js';

let redis: TestRedis | undefined;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

meteringStoreContract('memory', async () => {
  const store = new MemoryMeteringStore();
  return { stores: [store, store], cleanup: async () => {} };
});

meteringStoreContract('redis', async () => {
  if (!redis) throw new Error('no Redis');
  const url = redis.url;
  const clients = await Promise.all([connected(redisClient(url, 2_000)), connected(redisClient(url, 2_000))]);
  const prefix = `mt${randomUUID().slice(0, 8)}:`;
  // Two clients, as two replicas: each defines the script on its own connection.
  const stores = clients.map((c) => new RedisMeteringStore(c, prefix, 400 * DAY_MS)) as [
    RedisMeteringStore,
    RedisMeteringStore,
  ];
  return {
    stores,
    cleanup: async () => {
      await Promise.all(clients.map((c) => c.quit()));
    },
  };
});
