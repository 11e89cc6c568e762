import { randomUUID } from 'node:crypto';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { creditKeys, RedisCreditLedger } from '../../src/credits/redis-credit-ledger.js';
import { UTC_CALENDAR } from '../../src/limits/calendar.js';
import { RedisKeyLimiter } from '../../src/limits/engines/redis-key-limiter.js';
import { policyFor, withCredits } from '../../src/limits/policy.js';
import { connected, redisClient } from '../support/helpers.js';
import { creditLedgerContract } from './credit-ledger.contract.js';

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

/** A key standing for itself with credits and a window far above anything spent here. */
const POLICY = withCredits(policyFor({ perMinute: 1_000_000 }), {}, UTC_CALENDAR);
const BAN = { threshold: 1_000_000, windowMs: 60_000, durationMs: 60_000, graceMs: 0, minRetryAfterMs: 0 };

creditLedgerContract('redis', async (retentionMs) => {
  const client = await connected(redisClient(redis.url, 2_000));
  const prefix = `t${randomUUID().slice(0, 8)}:`;
  return {
    ledger: new RedisCreditLedger(client, prefix, retentionMs),
    // The limit script itself spends, one limiter per call so that each has its own clock.
    spend: async (owner, units, now) => {
      const limiter = new RedisKeyLimiter(client, prefix, BAN, () => now);
      return (await limiter.consume(owner, POLICY, units)).outcome === 'admitted';
    },
    cleanup: async () => client.disconnect(),
  };
});

describe('redis ledger: a page it cannot read', () => {
  // A page is one transaction: a command of it that fails fails the page, rather than showing a
  // ledger with entries or its opening missing.
  it.each([
    ['the ledger', 1],
    ['the balance’s state', 0],
  ] as const)('rejects with the error when %s is not what the ledger wrote', async (_label, which) => {
    const client = await connected(redisClient(redis.url, 2_000));
    try {
      const prefix = `t${randomUUID().slice(0, 8)}:`;
      await client.set(creditKeys(prefix, 'cus_broken')[which], 'not a stream nor a hash');
      const ledger = new RedisCreditLedger(client, prefix);
      await expect(ledger.page('cus_broken', { limit: 5 })).rejects.toThrow(/WRONGTYPE/);
    } finally {
      client.disconnect();
    }
  });
});
