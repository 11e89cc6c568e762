import { randomUUID } from 'node:crypto';
import { MemoryWebhookStore } from '../../src/webhooks/subscriptions/memory-webhook-store.js';
import { RedisWebhookStore } from '../../src/webhooks/subscriptions/redis-webhook-store.js';
import { useRedisClient } from '../support/helpers.js';
import { webhookStoreContract } from './webhook-store.contract.js';

const redis = useRedisClient();

webhookStoreContract('MemoryWebhookStore', async () => new MemoryWebhookStore());
webhookStoreContract('RedisWebhookStore', async () => {
  return new RedisWebhookStore(redis(), `wc${randomUUID().slice(0, 8)}:`);
});
