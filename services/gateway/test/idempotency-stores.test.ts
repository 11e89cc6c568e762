import { randomUUID } from 'node:crypto';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { MemoryIdempotencyStore } from '../src/idempotency/idempotency-store.js';
import { RedisIdempotencyStore } from '../src/idempotency/redis-idempotency-store.js';
import { connected, redisClient } from './helpers.js';
import { idempotencyStoreContract } from './idempotency-store.contract.js';

let redis: TestRedis | undefined;
let client: Redis | undefined;
beforeAll(async () => {
  redis = await startRedis();
  client = await connected(redisClient(redis.url, 2_000));
});
afterAll(async () => {
  client?.disconnect();
  await redis?.stop();
});

idempotencyStoreContract('MemoryIdempotencyStore', async () => new MemoryIdempotencyStore());
idempotencyStoreContract('RedisIdempotencyStore', async () => {
  if (!client) throw new Error('no Redis');
  return new RedisIdempotencyStore(client, `ic${randomUUID().slice(0, 8)}:`);
});
