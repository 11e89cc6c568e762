import { randomUUID } from 'node:crypto';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { MemoryWebhookStore } from '../src/webhooks/memory-webhook-store.js';
import { RedisWebhookStore } from '../src/webhooks/redis-webhook-store.js';
import { connected, redisClient } from './helpers.js';
import { webhookStoreContract } from './webhook-store.contract.js';

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

webhookStoreContract('MemoryWebhookStore', async () => new MemoryWebhookStore());
webhookStoreContract('RedisWebhookStore', async () => {
  if (!client) throw new Error('no Redis');
  return new RedisWebhookStore(client, `wc${randomUUID().slice(0, 8)}:`);
});
