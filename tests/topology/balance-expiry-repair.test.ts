import { randomUUID } from 'node:crypto';
import { loadConfig } from '@animal-store/gateway/config.js';
import { BALANCE_REPAIR_MARKER, repairBalanceExpiry } from '@animal-store/gateway/credits/balance-expiry-repair.js';
import { creditKeys } from '@animal-store/gateway/credits/redis-credit-ledger.js';
import { createRedisClients, type RedisClient, whenReady } from '@animal-store/gateway/redis/clients.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisClusterTopology } from '../support/redis-topology.js';

describe('balance expiry repair on a Redis Cluster (3 masters)', () => {
  let topology: RedisClusterTopology;
  let redis: RedisClient;
  beforeAll(async () => {
    topology = await RedisClusterTopology.start();
    const target = loadConfig(topology.env).redis;
    if (!target) throw new Error('topology env names no Redis');
    redis = createRedisClients(target, 2_000, { subscriber: false }).redis;
    await whenReady(redis);
  });
  afterAll(async () => {
    redis?.disconnect();
    await topology?.stop();
  });

  it('repairs the balances every master holds', async () => {
    const prefix = `t${randomUUID().slice(0, 8)}:`;
    const owners = Array.from({ length: 60 }, (_, i) => `key_${i}`);
    for (const owner of owners) {
      const [hash] = creditKeys(prefix, owner);
      await redis.hset(hash, { b: '100', h: '493000', u: '0', r: '', '13a': '1', '13:30u': '4' });
      await redis.pexpireat(hash, Date.now() + 86_400_000);
    }
    const masters = new Set(await Promise.all(owners.map(async (o) => (await topology.masterFor(o)).port)));
    expect(masters.size).toBe(3);

    const outcome = await repairBalanceExpiry(redis, prefix, { info: () => {}, warn: () => {} });

    expect(outcome).toEqual({ outcome: 'repaired', scanned: 60, repaired: 60, expiries: 60, fields: 120 });
    for (const owner of owners) {
      const [hash] = creditKeys(prefix, owner);
      expect(await redis.pttl(hash)).toBe(-1);
      expect(await redis.hgetall(hash)).toEqual({ b: '100', h: '493000', u: '0', r: '' });
    }
    expect(await redis.exists(`${prefix}${BALANCE_REPAIR_MARKER}`)).toBe(1);
  });
});
