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
      const [minute, , , , grace] = limiter.keys(keyId);
      // The grace key lives as long as the window that filled.
      await client.del(minute, grace);
    },
    endGrace: async (keyId) => {
      // Its age is the lifetime it holds less its PTTL: take graceMs off the PTTL.
      const grace = limiter.keys(keyId)[4];
      const left = await client.pttl(grace);
      if (left > ban.graceMs) await client.pexpire(grace, left - ban.graceMs);
      else await client.del(grace);
    },
    cleanup: async () => {
      client.disconnect();
    },
  };
});
