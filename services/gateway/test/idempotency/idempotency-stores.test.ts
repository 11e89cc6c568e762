import { randomUUID } from 'node:crypto';
import { MemoryIdempotencyStore } from '../../src/idempotency/idempotency-store.js';
import { RedisIdempotencyStore } from '../../src/idempotency/redis-idempotency-store.js';
import { useRedisClient } from '../support/helpers.js';
import { idempotencyStoreContract } from './idempotency-store.contract.js';

const redis = useRedisClient();

idempotencyStoreContract('MemoryIdempotencyStore', async () => new MemoryIdempotencyStore());
idempotencyStoreContract('RedisIdempotencyStore', async () => {
  return new RedisIdempotencyStore(redis(), `ic${randomUUID().slice(0, 8)}:`);
});
