import { randomUUID } from 'node:crypto';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  BALANCE_REPAIR_MARKER,
  BalanceExpiryRepair,
  repairBalanceExpiry,
} from '../../src/credits/balance-expiry-repair.js';
import { creditKeys } from '../../src/credits/redis-credit-ledger.js';
import { connected, redisClient, startGateway } from '../support/helpers.js';

let server: TestRedis;
let redis: Redis;
beforeAll(async () => {
  server = await startRedis();
  redis = await connected(redisClient(server.url, 2_000));
});
afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

const newPrefix = () => `t${randomUUID().slice(0, 8)}:`;
const DAY_MS = 86_400_000;

/** Every field a balance hash of its own holds (credit-script.ts), one reference looking like an hour field. */
const LEGIT = {
  b: '740',
  h: '493000',
  u: '12',
  r: 'period:1764720000000',
  x: '1',
  m: '1000',
  p: '492999',
  q: '3',
  o: '900',
  oi: '1764720000000-0',
  'i:top-up-1': '1764720000001-0',
  'i:13a': '1764720000002-0',
};

/** A key's balance as the usage history left it: its fields, three hour fields and the history's expiry. */
async function brokenBalance(prefix: string, owner: string): Promise<string> {
  const [hash, ledger] = creditKeys(prefix, owner);
  await redis.hset(hash, { ...LEGIT, '13a': '5', '13u': '9', '13:30l': '2' });
  await redis.pexpireat(hash, Date.now() + 2 * DAY_MS);
  await redis.xadd(ledger, '*', 'type', 'top-up', 'amount', '1000', 'at', '1764720000000', 'ref', 'top-up-1');
  return hash;
}

async function healthyBalance(prefix: string, owner: string): Promise<string> {
  const [hash] = creditKeys(prefix, owner);
  await redis.hset(hash, LEGIT);
  return hash;
}

function logs() {
  const lines: Array<{ level: 'info' | 'warn'; obj: object; msg: string }> = [];
  return {
    lines,
    info: (obj: object, msg: string) => void lines.push({ level: 'info', obj, msg }),
    warn: (obj: object, msg: string) => void lines.push({ level: 'warn', obj, msg }),
  };
}

describe('balance expiry repair', () => {
  it('takes the expiry and the hour fields off a balance, and nothing else anywhere', async () => {
    const prefix = newPrefix();
    const other = newPrefix();
    const broken = await brokenBalance(prefix, 'key_broken');
    const healthy = await healthyBalance(prefix, 'cus_healthy');
    const ledger = creditKeys(prefix, 'key_broken')[1];
    // A day hash of the usage history under the prefix, and a balance-shaped hash of another prefix.
    const history = `${prefix}{key_broken}:usage:20261203`;
    await redis.hset(history, { '13a': '5', '13u': '9' });
    await redis.pexpire(history, DAY_MS);
    // Matches the SCAN's glob, yet is no balance's name.
    const lookalike = `${prefix}{key_broken}:usage:{20261203}:credits`;
    await redis.hset(lookalike, { '13a': '5' });
    await redis.pexpire(lookalike, DAY_MS);
    const foreign = creditKeys(other, 'key_broken')[0];
    await redis.hset(foreign, { b: '1', '13a': '5' });
    await redis.pexpire(foreign, DAY_MS);
    const log = logs();

    const outcome = await repairBalanceExpiry(redis, prefix, log);

    expect(outcome).toEqual({ outcome: 'repaired', scanned: 2, repaired: 1, expiries: 1, fields: 3 });
    expect(await redis.pttl(broken)).toBe(-1);
    expect(await redis.hgetall(broken)).toEqual(LEGIT);
    expect(await redis.hgetall(healthy)).toEqual(LEGIT);
    expect(await redis.pttl(healthy)).toBe(-1);
    expect(await redis.xlen(ledger)).toBe(1);
    expect(await redis.hgetall(history)).toEqual({ '13a': '5', '13u': '9' });
    expect(await redis.pttl(history)).toBeGreaterThan(0);
    expect(await redis.hgetall(lookalike)).toEqual({ '13a': '5' });
    expect(await redis.pttl(lookalike)).toBeGreaterThan(0);
    expect(await redis.hgetall(foreign)).toEqual({ b: '1', '13a': '5' });
    expect(await redis.pttl(foreign)).toBeGreaterThan(0);
    expect(await redis.exists(`${prefix}${BALANCE_REPAIR_MARKER}`)).toBe(1);
    expect(await redis.pttl(`${prefix}${BALANCE_REPAIR_MARKER}`)).toBe(-1);
    expect(log.lines).toEqual([
      {
        level: 'info',
        obj: { scanned: 2, repaired: 1, expiries: 1, fields: 3 },
        msg: 'credits: balance expiry repair: 1 of 2 balances repaired (1 expiries removed, 3 hour fields removed)',
      },
    ]);
  });

  it('does nothing once the marker is set', async () => {
    const prefix = newPrefix();
    await repairBalanceExpiry(redis, prefix, logs());
    const broken = await brokenBalance(prefix, 'key_later');
    const log = logs();

    expect(await repairBalanceExpiry(redis, prefix, log)).toEqual({ outcome: 'already done' });
    expect(await redis.pttl(broken)).toBeGreaterThan(0);
    expect(await redis.hexists(broken, '13a')).toBe(1);
    expect(log.lines).toEqual([]);
  });

  it('counts nothing when nothing needs repairing, and sets the marker', async () => {
    const prefix = newPrefix();
    await healthyBalance(prefix, 'cus_a');
    await healthyBalance(prefix, 'key_b');

    expect(await repairBalanceExpiry(redis, prefix, logs())).toEqual({
      outcome: 'repaired',
      scanned: 2,
      repaired: 0,
      expiries: 0,
      fields: 0,
    });
    expect(await redis.exists(`${prefix}${BALANCE_REPAIR_MARKER}`)).toBe(1);
  });

  it('pages through more balances than one SCAN returns', async () => {
    const prefix = newPrefix();
    const hashes = await Promise.all(Array.from({ length: 2_500 }, (_, i) => brokenBalance(prefix, `key_${i}`)));

    const outcome = await repairBalanceExpiry(redis, prefix, logs());

    expect(outcome).toEqual({ outcome: 'repaired', scanned: 2_500, repaired: 2_500, expiries: 2_500, fields: 7_500 });
    const ttls = await Promise.all(hashes.map((h) => redis.pttl(h)));
    expect(ttls.filter((t) => t !== -1)).toEqual([]);
  });

  it('repairs each balance once between two replicas starting together', async () => {
    const prefix = newPrefix();
    const hashes = await Promise.all(Array.from({ length: 300 }, (_, i) => brokenBalance(prefix, `key_${i}`)));
    const second = await connected(redisClient(server.url, 2_000));
    try {
      const outcomes = await Promise.all([
        repairBalanceExpiry(redis, prefix, logs()),
        repairBalanceExpiry(second, prefix, logs()),
      ]);

      const repaired = outcomes.map((o) => (o.outcome === 'repaired' ? o : { repaired: 0, expiries: 0, fields: 0 }));
      expect(repaired.reduce((n, o) => n + o.expiries, 0)).toBe(300);
      expect(repaired.reduce((n, o) => n + o.fields, 0)).toBe(900);
      for (const h of hashes.slice(0, 3)) expect(await redis.hgetall(h)).toEqual(LEGIT);
      expect((await Promise.all(hashes.map((h) => redis.pttl(h)))).filter((t) => t !== -1)).toEqual([]);
    } finally {
      second.disconnect();
    }
  });

  it('stopped at shutdown, warns and sets no marker: the next run repairs', async () => {
    const prefix = newPrefix();
    const broken = await brokenBalance(prefix, 'key_stopped');
    const log = logs();

    const outcome = await repairBalanceExpiry(redis, prefix, log, AbortSignal.abort());

    expect(outcome.outcome).toBe('failed');
    expect(log.lines.map((l) => [l.level, l.msg])).toEqual([
      ['warn', 'credits: balance expiry repair failed; the next start runs it again'],
    ]);
    expect(await redis.exists(`${prefix}${BALANCE_REPAIR_MARKER}`)).toBe(0);
    expect(await redis.pttl(broken)).toBeGreaterThan(0);
    expect(await repairBalanceExpiry(redis, prefix, logs())).toMatchObject({ outcome: 'repaired', expiries: 1 });
    expect(await redis.pttl(broken)).toBe(-1);
  });

  it('stops when the gateway closes before it has scanned, and stop() waits for it', async () => {
    const prefix = newPrefix();
    const broken = await brokenBalance(prefix, 'key_closing');
    const log = logs();
    const repair = new BalanceExpiryRepair(redis, prefix, log);

    repair.start();
    await repair.stop();

    expect(log.lines.map((l) => l.level)).toEqual(['warn']);
    expect(await redis.exists(`${prefix}${BALANCE_REPAIR_MARKER}`)).toBe(0);
    expect(await redis.pttl(broken)).toBeGreaterThan(0);
  });
});

describe('the gateway in Redis mode', () => {
  it('repairs the balances once it listens', async () => {
    const prefix = newPrefix();
    const broken = await brokenBalance(prefix, 'key_gateway');
    const gw = await startGateway({ redisUrl: server.url, prefix });
    try {
      await gw.listen();
      await vi.waitFor(async () => expect(await redis.pttl(broken)).toBe(-1), { timeout: 5_000, interval: 20 });
      expect(await redis.hgetall(broken)).toEqual(LEGIT);
      await vi.waitFor(async () => expect(await redis.exists(`${prefix}${BALANCE_REPAIR_MARKER}`)).toBe(1), {
        timeout: 5_000,
        interval: 20,
      });
    } finally {
      await gw.close();
    }
  });
});
