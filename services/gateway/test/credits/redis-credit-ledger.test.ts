import { randomUUID } from 'node:crypto';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import { afterAll, beforeAll } from 'vitest';
import { RedisCreditLedger } from '../../src/credits/redis-credit-ledger.js';
import { connected, redisClient } from '../support/helpers.js';
import { creditLedgerContract } from './credit-ledger.contract.js';

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

creditLedgerContract('redis', async () => {
  const client = await connected(redisClient(redis.url, 2_000));
  const prefix = `t${randomUUID().slice(0, 8)}:`;
  return { ledger: new RedisCreditLedger(client, prefix), cleanup: async () => client.disconnect() };
});
