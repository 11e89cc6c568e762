import { randomUUID } from 'node:crypto';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import { afterAll, beforeAll } from 'vitest';
import { RedisUsageHistory } from '../../src/usage/redis-usage-history.js';
import { DAY_MS, HOUR_MS, MemoryUsageHistory } from '../../src/usage/usage-history.js';
import { connected, redisClient } from '../support/helpers.js';
import { testClockFrom } from '../support/test-clock.js';
import { usageHistoryContract } from './usage-history.contract.js';

let redis: TestRedis | undefined;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

/** 10:20 UTC today: an hour and a day with room on both sides. */
const start = () => Math.floor(Date.now() / DAY_MS) * DAY_MS + 10 * HOUR_MS + 20 * 60_000;

usageHistoryContract('memory', async (retentionMs) => {
  let clock = start();
  return {
    history: new MemoryUsageHistory(retentionMs, () => clock),
    now: () => clock,
    advance: async (ms) => {
      clock += ms;
    },
    cleanup: async () => {},
  };
});

usageHistoryContract('redis', async (retentionMs) => {
  if (!redis) throw new Error('no Redis');
  const client = await connected(redisClient(redis.url, 2_000));
  const prefix = `uh${randomUUID().slice(0, 8)}:`;
  // Today's hours expire by Redis's real clock: it moves with the history's (test-clock.ts), and
  // starts at the real now. The hashes expire at an instant (PEXPIREAT), so a clock started
  // elsewhere (10:20, as the memory store's) would shift every expiry by its distance from the
  // wall clock: the retention tests failed from 23:20 to 10:20 UTC.
  const clock = testClockFrom(Date.now(), { client, prefix });
  const history = new RedisUsageHistory(client, prefix, retentionMs);
  return {
    history,
    now: clock.now,
    advance: (ms) => clock.advance(ms),
    cleanup: async () => {
      await history.flush();
      client.disconnect();
    },
  };
});
