import { randomUUID } from 'node:crypto';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import { afterAll, beforeAll } from 'vitest';
import { RedisKeyLimiter } from '../src/limits/redis-key-limiter.js';
import { connected, redisClient } from './helpers.js';
import { limiterContract } from './limiter.contract.js';

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  // Unset when beforeAll failed: that failure is the one to report, not a TypeError here.
  await redis?.stop();
});

limiterContract('redis', async (ban) => {
  const client = await connected(redisClient(redis.url));
  const limiter = new RedisKeyLimiter(client, `t${randomUUID().slice(0, 8)}:`, ban);
  return {
    limiter,
    endMinuteWindow: async (keyId) => {
      await client.del(limiter.keys(keyId)[0]);
    },
    cleanup: async () => {
      client.disconnect();
    },
  };
});
