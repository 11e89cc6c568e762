import { randomUUID } from 'node:crypto';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { RedisCreditLedger } from '../../../src/credits/redis-credit-ledger.js';
import { DEFAULT_BILLING } from '../../../src/limits/billing-period.js';
import { calendarFor } from '../../../src/limits/calendar.js';
import { RedisKeyLimiter } from '../../../src/limits/engines/redis-key-limiter.js';
import { customerPolicyFor, withCredits } from '../../../src/limits/policy.js';
import { redisOptions } from '../../../src/redis/clients.js';
import { RedisUsageHistory } from '../../../src/usage/redis-usage-history.js';
import { DAY_MS, HOUR_MS } from '../../../src/usage/usage-history.js';
import { connected, redisClient } from '../../support/helpers.js';
import { holdingProxy } from '../../support/holding-proxy.js';

/*
 * A limit-script call the limiter stopped waiting for (its command timeout) may still have run:
 * Redis stopped after running it, or its reply waited on the way back. The requests were answered
 * without it (the fallback, or 503), so what it counted and spent must not stand. A proxy holds
 * one way of the traffic, so each case happens for certain rather than by timing.
 */

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

/**
 * Long enough that a call sent on a busy machine still reaches Redis before its deadline (0.8 of
 * it) when only its reply is held, and one held on its way there arrives after it.
 */
const TIMEOUT_MS = 1_000;
const NO_BANS = { threshold: 1_000_000, windowMs: 60_000, durationMs: 60_000, graceMs: 0, minRetryAfterMs: 0 };
const policy = withCredits(
  customerPolicyFor({ perMinute: 10_000 }, undefined, 'fixed', false, DEFAULT_BILLING),
  {},
  calendarFor(DEFAULT_BILLING),
);
const rule = policy.credits as NonNullable<typeof policy.credits>;

async function setup() {
  const proxy = await holdingProxy(redis.url);
  const direct = await connected(redisClient(redis.url, 2_000));
  // As the gateway's limiter connection: no timeout of ioredis's own (redis/clients.ts).
  const untimed = new Redis(proxy.url, { ...redisOptions(TIMEOUT_MS), commandTimeout: undefined });
  untimed.on('error', () => {});
  await connected(untimed);
  onTestFinished(async () => {
    untimed.disconnect();
    direct.disconnect();
    await proxy.close();
  });
  const prefix = `t${randomUUID().slice(0, 8)}:`;
  const history = new RedisUsageHistory(direct, prefix, 7 * DAY_MS);
  const limiter = new RedisKeyLimiter(direct, prefix, NO_BANS, Date.now, history, TIMEOUT_MS, untimed);
  const refunds: Array<{ owner: string; decisions: number; credits: number }> = [];
  limiter.whenUnanswered(({ owner, decisions, credits }) => refunds.push({ owner, decisions, credits }));
  const ledger = new RedisCreditLedger(direct, prefix);
  const customer = `cus_${randomUUID().slice(0, 8)}`;
  const key = `key_${randomUUID().slice(0, 8)}`;
  await ledger.add(
    customer,
    rule,
    { type: 'topup', amount: 100, reason: 'test', ref: 'r', at: Date.now() },
    Date.now(),
  );
  const consume = (cost = 1) => limiter.consume(key, policy, cost, customer);
  // One answered call first: the limiter then knows Redis's clock, so its calls carry a deadline.
  expect((await consume()).outcome).toBe('admitted');
  const totals = async (id: string, customerId?: string) => {
    await history.flush();
    const hours = await history.hours(id, Date.now() - 2 * HOUR_MS, Date.now() + HOUR_MS, customerId);
    return hours.reduce((t, h) => ({ admitted: t.admitted + h.admitted, units: t.units + h.units }), {
      admitted: 0,
      units: 0,
    });
  };
  const balance = async () => (await ledger.balance(customer, rule, Date.now())).balance;
  return { proxy, consume, refunds, totals, balance, customer, key };
}

describe('a limit-script call answered after its command timeout', () => {
  it('that ran: its counts are taken back out of the history and the credits it spent are given back', async () => {
    const { proxy, consume, refunds, totals, balance, customer, key } = await setup();
    proxy.hold('replies');
    // Three requests in one call (one batch): Redis runs it, the answer stays on the way back.
    const calls = await Promise.allSettled([consume(1), consume(2), consume(1)]);
    expect(calls.map((c) => c.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(String((calls[0] as PromiseRejectedResult).reason)).toContain('Command timed out');
    // It did run: Redis spent 4 more for requests no client was admitted with.
    expect(await balance()).toBe(95);
    proxy.release();
    await vi.waitFor(() => expect(refunds).toEqual([{ owner: customer, decisions: 3, credits: 4 }]), { interval: 10 });
    // The history holds the one answered admission, for the key and its customer alike.
    expect(await totals(key, customer)).toEqual({ admitted: 1, units: 1 });
    expect(await totals(customer)).toEqual({ admitted: 1, units: 1 });
    // And the next call is answered as usual.
    expect((await consume()).outcome).toBe('admitted');
    expect(await totals(key, customer)).toEqual({ admitted: 2, units: 2 });
  });

  it('that reached Redis past its deadline: it did nothing, so nothing is taken back or given back', async () => {
    const { proxy, consume, refunds, totals, balance, customer, key } = await setup();
    proxy.hold('requests');
    const calls = await Promise.allSettled([consume(1), consume(1)]);
    expect(calls.map((c) => c.status)).toEqual(['rejected', 'rejected']);
    proxy.release();
    // The next call goes after the held one on the same connection: once it is answered, so was that.
    expect((await consume()).outcome).toBe('admitted');
    expect(refunds).toEqual([]);
    expect(await balance()).toBe(98);
    expect(await totals(key, customer)).toEqual({ admitted: 2, units: 2 });
    expect(await totals(customer)).toEqual({ admitted: 2, units: 2 });
  });
});
