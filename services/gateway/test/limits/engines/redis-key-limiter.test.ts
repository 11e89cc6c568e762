import { createHash, randomUUID } from 'node:crypto';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { RedisCreditLedger } from '../../../src/credits/redis-credit-ledger.js';
import { DEFAULT_BILLING } from '../../../src/limits/billing-period.js';
import { calendarFor, UTC_CALENDAR } from '../../../src/limits/calendar.js';
import { LIMIT_SCRIPT_PARTS } from '../../../src/limits/engines/limit-script.js';
import { RedisKeyLimiter } from '../../../src/limits/engines/redis-key-limiter.js';
import { customerPolicyFor, policyFor, withCredits } from '../../../src/limits/policy.js';
import { RedisUsageHistory } from '../../../src/usage/redis-usage-history.js';
import { DAY_MS } from '../../../src/usage/usage-history.js';
import { connected, redisClient } from '../../support/helpers.js';
import { testClock, testClockFrom } from '../../support/test-clock.js';
import { limiterContract } from '../limiter.contract.js';

/** A billing calendar whose day is not the UTC day: its counters are keys of their own. */
const PARIS = { anchorDay: 15, timeZone: 'Europe/Paris' };

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  // Unset when beforeAll failed: that failure is the one to report, not a TypeError here.
  await redis?.stop();
});

/**
 * Two clients of the test's Redis: `admin` may run anything, `denied` is a Redis user of its own
 * that may run everything but `command` (a write the test makes fail where it wants); both go,
 * and the user with them, when the test ends.
 */
async function deniedClient(command: string) {
  const admin = await connected(redisClient(redis.url));
  const user = `deny_${command}_${randomUUID().slice(0, 8)}`;
  await admin.call('ACL', 'SETUSER', user, 'on', '>pw', '~*', '&*', '+@all', `-${command}`);
  const url = new URL(redis.url);
  url.username = user;
  url.password = 'pw';
  const denied = await connected(redisClient(url.href));
  onTestFinished(async () => {
    denied.disconnect();
    await admin.call('ACL', 'DELUSER', user);
    admin.disconnect();
  });
  return { admin, denied, user };
}

/**
 * Every case twice: without the usage history (the day window a key of its own) and with it, as
 * the gateway runs (the day window the field `d` of the day's history hash).
 */
for (const withHistory of [false, true]) {
  limiterContract(withHistory ? 'redis, with the usage history' : 'redis', async (ban) => {
    // A command timeout of its own: the contract is about decisions, and this machine may be busy.
    const client = await connected(redisClient(redis.url, 2_000));
    const prefix = `t${randomUUID().slice(0, 8)}:`;
    // A clock that moves only when the test moves it, taking the TTLs of the limiter's keys with it:
    // sliding buckets and refusals to the millisecond, and state gone only when its time is up.
    const clock = testClock({ client, prefix });
    const history = withHistory ? new RedisUsageHistory(client, prefix, 35 * DAY_MS) : null;
    const limiter = new RedisKeyLimiter(client, prefix, ban, clock.now, history);
    return {
      limiter,
      credits: new RedisCreditLedger(client, prefix),
      ...clock,
      cleanup: async () => {
        await history?.flush();
        client.disconnect();
      },
    };
  });
}

describe('two replicas on one Redis', () => {
  const replicas = async (n: number, prefix = `t${randomUUID().slice(0, 8)}:`) => {
    const ban = { threshold: 1_000_000, windowMs: 60_000, durationMs: 60_000, graceMs: 0, minRetryAfterMs: 0 };
    const clients = await Promise.all(Array.from({ length: n }, () => connected(redisClient(redis.url))));
    onTestFinished(() => {
      for (const client of clients) client.disconnect();
    });
    return clients.map((client) => new RedisKeyLimiter(client, prefix, ban));
  };

  it.each([
    ['fixed', policyFor({ perMinute: 100, perDay: 1_000 })],
    ['sliding', policyFor({ perSecond: 1_000, perMinute: 100, perDay: 1_000 }, 'sliding')],
    ['monthly', policyFor({ perMonth: 100 })],
  ])('share every window exactly under concurrency, costs included (%s)', async (_label, policy) => {
    const [a, b] = (await replicas(2)) as [RedisKeyLimiter, RedisKeyLimiter];
    const keyId = `key_${randomUUID()}`;
    // 3 units each: 33 fit in 100, whichever replica sends them.
    const decisions = await Promise.all(
      Array.from({ length: 120 }, (_, i) => (i % 2 === 0 ? a : b).consume(keyId, policy, 3)),
    );
    expect(decisions.filter((d) => d.outcome === 'admitted')).toHaveLength(33);
    const usage = await a.usage(keyId, policy);
    for (const w of usage.windows) expect(w.used, w.name).toBe(99);
  });

  it.each([
    ['fixed', customerPolicyFor({ perMinute: 300, perDay: 10_000 }, undefined, 'fixed', false, DEFAULT_BILLING), 1],
    ['sliding', customerPolicyFor({ perMinute: 300 }, { perMinute: 200 }, 'sliding', false, DEFAULT_BILLING), 1],
    ['costs, a billing calendar', customerPolicyFor({ perDay: 300 }, undefined, 'fixed', false, PARIS), 3],
  ])('share a customer’s windows exactly: 3 keys × 150 concurrent requests (%s)', async (_label, policy, cost) => {
    const [a, b] = (await replicas(2)) as [RedisKeyLimiter, RedisKeyLimiter];
    const customer = `cus_${randomUUID()}`;
    const keys = [0, 1, 2].map(() => `key_${randomUUID()}`);
    const decisions = await Promise.all(
      keys.flatMap((key) =>
        Array.from({ length: 150 }, (_, i) => (i % 2 === 0 ? a : b).consume(key, policy, cost, customer)),
      ),
    );
    const admitted = decisions.filter((d) => d.outcome === 'admitted').length;
    expect(admitted).toBe(Math.floor(300 / cost));
    const [shared] = await b.customerUsage(customer, policy);
    expect(shared?.used).toBe(admitted * cost);
  });

  it('keeps everything of a key of a customer in the customer’s slot, and the customer’s hours as the sum of its keys’', async () => {
    const client = await connected(redisClient(redis.url));
    onTestFinished(() => client.disconnect());
    const prefix = `t${randomUUID().slice(0, 8)}:`;
    const history = new RedisUsageHistory(client, prefix, 35 * DAY_MS);
    const ban = { threshold: 0, windowMs: 60_000, durationMs: 60_000, graceMs: 0, minRetryAfterMs: 0 };
    const limiter = new RedisKeyLimiter(client, prefix, ban, Date.now, history);
    const customer = `cus_${randomUUID().slice(0, 8)}`;
    const [a, b] = [`key_${randomUUID().slice(0, 8)}`, `key_${randomUUID().slice(0, 8)}`];
    const policy = customerPolicyFor(
      { perMinute: 3, perDay: 100, perMonth: 1_000 },
      { perMinute: 2 },
      'fixed',
      false,
      DEFAULT_BILLING,
    );
    for (const key of [a, a, b, b]) await limiter.consume(key, policy, 1, customer);
    const day = Math.floor(Date.now() / DAY_MS);
    const names = (await client.keys(`${prefix}*`)).map((k) => k.slice(prefix.length)).sort();
    const monthStart = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 1) / 60_000;
    // b's second request was refused by the customer's minute (threshold 0: banned at once). Outside
    // the slot: the day's active sets and the index of bans in force, each a key of its own.
    expect(names).toEqual(
      [
        'bans',
        `usage:keys:${day}`,
        `usage:customers:${day}`,
        `{${customer}}:c:m`,
        `{${customer}}:c:mo:${monthStart}`,
        `{${customer}}:h:${day}`,
        `{${customer}}:${a}:m`,
        `{${customer}}:${a}:h:${day}`,
        `{${customer}}:${b}:m`,
        `{${customer}}:${b}:h:${day}`,
        `{${customer}}:${b}:ban`,
      ].sort(),
    );
    const hour = new Date().getUTCHours();
    const sum = (rows: { admitted: number; banned: number }[]) =>
      rows.reduce((t, r) => ({ admitted: t.admitted + r.admitted, banned: t.banned + r.banned }), {
        admitted: 0,
        banned: 0,
      });
    const from = (day * 24 + hour) * 3_600_000;
    expect(sum(await history.hours(customer, from, from + 3_600_000))).toEqual({ admitted: 3, banned: 1 });
    expect(sum(await history.hours(a, from, from + 3_600_000, customer))).toEqual({ admitted: 2, banned: 0 });
    expect(sum(await history.hours(b, from, from + 3_600_000, customer))).toEqual({ admitted: 1, banned: 1 });
    // The customer's day is the field `d` of its day hash; each key's own windows are the key's.
    expect(await client.hget(`${prefix}{${customer}}:h:${day}`, 'd')).toBe('3');
  });

  it('goes on from a key’s counters written before customers existed: a key without one keeps its names', async () => {
    const client = await connected(redisClient(redis.url));
    onTestFinished(() => client.disconnect());
    const prefix = `t${randomUUID().slice(0, 8)}:`;
    const keyId = `key_${randomUUID()}`;
    const day = Math.floor(Date.now() / DAY_MS);
    // What an earlier version left: the minute counter, and the day in the history's hash.
    await client.set(`${prefix}{${keyId}}:m`, '4', 'PX', 60_000);
    await client.hset(`${prefix}{${keyId}}:h:${day}`, 'd', '9');
    const history = new RedisUsageHistory(client, prefix, 35 * DAY_MS);
    const ban = { threshold: 1_000_000, windowMs: 60_000, durationMs: 60_000, graceMs: 0, minRetryAfterMs: 0 };
    const limiter = new RedisKeyLimiter(client, prefix, ban, Date.now, history);
    const policy = policyFor({ perMinute: 5, perDay: 10 });
    const first = await limiter.consume(keyId, policy, 1);
    expect(first.windows.map((w) => [w.name, w.remaining])).toEqual([
      ['minute', 0],
      ['day', 0],
    ]);
    expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('limited');
  });

  it('runs the limit script as limit-script.ts composes it from its parts', async () => {
    const client = await connected(redisClient(redis.url));
    onTestFinished(() => client.disconnect());
    const limiter = new RedisKeyLimiter(client, `t${randomUUID().slice(0, 8)}:`, {
      threshold: 1_000_000,
      windowMs: 60_000,
      durationMs: 60_000,
      graceMs: 0,
      minRetryAfterMs: 0,
    });
    // The parts' definitions in the order they are called, then the body that wires them.
    const { DEADLINE, READ_WINDOWS, CREDITS_READ, BAN_LEFT, DECIDE, TAKE, BAN, HISTORY, CREDITS_WRITE, REPLY, MAIN } =
      LIMIT_SCRIPT_PARTS;
    const parts = [DEADLINE, READ_WINDOWS, CREDITS_READ, BAN_LEFT, DECIDE, TAKE, BAN, HISTORY, CREDITS_WRITE, REPLY];
    const sha = createHash('sha1')
      .update(parts.join('') + MAIN)
      .digest('hex');
    // No script cached: what the decision below leaves is the text it sent.
    await client.script('FLUSH');
    expect(await client.script('EXISTS', sha)).toEqual([0]);
    expect((await limiter.consume(`key_${randomUUID()}`, policyFor({ perMinute: 1 }), 1)).outcome).toBe('admitted');
    expect(await client.script('EXISTS', sha)).toEqual([1]);
  });

  it('keeps a month’s count through a restart: a new limiter on the same Redis goes on from it', async () => {
    const prefix = `t${randomUUID().slice(0, 8)}:`;
    const [first] = (await replicas(1, prefix)) as [RedisKeyLimiter];
    const policy = policyFor({ perMinute: 1_000, perMonth: 5 });
    const keyId = `key_${randomUUID()}`;
    for (let i = 0; i < 4; i++) expect((await first.consume(keyId, policy, 1)).outcome).toBe('admitted');
    const [again] = (await replicas(1, prefix)) as [RedisKeyLimiter];
    expect((await again.usage(keyId, policy)).windows.map((w) => w.used)).toEqual([4, 4]);
    expect((await again.consume(keyId, policy, 1)).outcome).toBe('admitted');
    const refused = await again.consume(keyId, policy, 1);
    expect(refused.outcome).toBe('limited');
    if (refused.outcome !== 'limited') return;
    const now = new Date();
    const monthEnd = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
    expect(Math.abs(Date.now() + refused.retryAfterMs - monthEnd)).toBeLessThan(2_000);
  });
});

describe('credits over two replicas on one Redis', () => {
  const replicas = async () => {
    const ban = { threshold: 1_000_000, windowMs: 60_000, durationMs: 60_000, graceMs: 0, minRetryAfterMs: 0 };
    const prefix = `t${randomUUID().slice(0, 8)}:`;
    const clients = await Promise.all([0, 1].map(() => connected(redisClient(redis.url))));
    onTestFinished(() => {
      for (const client of clients) client.disconnect();
    });
    const limiters = clients.map((client) => new RedisKeyLimiter(client, prefix, ban)) as [
      RedisKeyLimiter,
      RedisKeyLimiter,
    ];
    return {
      limiters,
      ledger: new RedisCreditLedger(clients[0] as Redis, prefix),
      client: clients[0] as Redis,
      prefix,
    };
  };
  const customerPolicy = withCredits(
    customerPolicyFor({ perMinute: 10_000 }, undefined, 'fixed', false, DEFAULT_BILLING),
    {},
    calendarFor(DEFAULT_BILLING),
  );

  it.each([
    ['cost 1', [1]],
    ['mixed costs', [1, 2, 3]],
  ])(
    'spend a customer’s balance of 100 exactly: 300 concurrent requests over 3 keys (%s), the balance the ledger’s sum',
    async (_label, costs) => {
      const { limiters, ledger } = await replicas();
      const customer = `cus_${randomUUID()}`;
      const keys = [0, 1, 2].map(() => `key_${randomUUID()}`);
      const rule = customerPolicy.credits as NonNullable<typeof customerPolicy.credits>;
      await ledger.add(
        customer,
        rule,
        { type: 'grant', amount: 100, reason: 'test', ref: 'r1', at: Date.now() },
        Date.now(),
      );
      const decisions = await Promise.all(
        Array.from({ length: 300 }, (_, i) =>
          limiters[i % 2]?.consume(keys[i % 3] as string, customerPolicy, costs[i % costs.length] as number, customer),
        ),
      );
      const spent = decisions.reduce(
        (total, d, i) => total + (d?.outcome === 'admitted' ? (costs[i % costs.length] as number) : 0),
        0,
      );
      if (costs.length === 1) expect(spent).toBe(100);
      // Every refusal was for credits, and none would have fitted in what was left.
      const left = 100 - spent;
      expect(decisions.filter((d) => d?.outcome === 'limited' || d?.outcome === 'banned')).toHaveLength(0);
      const refused = decisions.flatMap((d, i) =>
        d?.outcome === 'exhausted' ? [costs[i % costs.length] as number] : [],
      );
      expect(Math.min(...refused)).toBeGreaterThan(left);
      // One call, on one of the replicas, found the balance unable to pay: credits.exhausted once.
      const announced = decisions.flatMap((d) => (d?.credits?.exhausted ? [d.credits.exhausted] : []));
      expect(announced).toHaveLength(1);
      // At the first refusal (a cheaper request may still have fitted after it), or at 0.
      const [first] = announced as [{ balance: number; cost?: number }];
      expect(first.balance).toBeGreaterThanOrEqual(left);
      expect(first.cost ?? 1).toBeGreaterThan(first.balance);
      const [minute] = await limiters[0].customerUsage(customer, customerPolicy);
      expect(minute?.used).toBe(spent);
      const { balance, openHour } = await ledger.balance(customer, rule, Date.now());
      const entries = (await ledger.page(customer, { limit: 500 })).items;
      expect(balance).toBe(left);
      expect(entries.reduce((t, e) => t + e.amount, 0) - (openHour?.spent ?? 0)).toBe(balance);
    },
  );

  it('keeps a customer’s balance in its slot, and costs a lone key without credits nothing more', async () => {
    const { limiters, ledger, client, prefix } = await replicas();
    const customer = `cus_${randomUUID().slice(0, 8)}`;
    const rule = customerPolicy.credits as NonNullable<typeof customerPolicy.credits>;
    await ledger.add(
      customer,
      rule,
      { type: 'topup', amount: 5, reason: 'test', ref: 'r', at: Date.now() },
      Date.now(),
    );
    await limiters[0].consume('key_a', customerPolicy, 1, customer);
    const lone = `key_${randomUUID().slice(0, 8)}`;
    await limiters[0].consume(lone, policyFor({ perMinute: 10 }), 1);
    const names = (await client.keys(`${prefix}*`)).map((k) => k.slice(prefix.length)).sort();
    expect(names).toEqual(
      [`{${customer}}:c:m`, `{${customer}}:credits`, `{${customer}}:credits:ledger`, `{${lone}}:m`].sort(),
    );
  });
});

describe('one replica’s calls for a key', () => {
  /** One turn of the event loop: requests spread over turns arrive while the key's call is out. */
  const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
  const NO_BANS = { threshold: 1_000_000, windowMs: 60_000, durationMs: 60_000, graceMs: 0, minRetryAfterMs: 0 };
  const start = async () => {
    const client = await connected(redisClient(redis.url));
    onTestFinished(() => client.disconnect());
    return { client, limiter: new RedisKeyLimiter(client, `t${randomUUID().slice(0, 8)}:`, NO_BANS) };
  };

  it('decides requests that arrive while the key’s call is out in its next call, in order', async () => {
    const { limiter } = await start();
    const keyId = `key_${randomUUID()}`;
    const policy = policyFor({ perMinute: 30, perDay: 1_000 });
    const pending = [];
    for (let i = 0; i < 40; i++) {
      pending.push(limiter.consume(keyId, policy, 1));
      await turn();
    }
    const decisions = await Promise.all(pending);
    expect(decisions.map((d) => d.outcome)).toEqual([...Array(30).fill('admitted'), ...Array(10).fill('limited')]);
    expect(decisions.map((d) => d.windows[0]?.remaining)).toEqual([
      ...Array.from({ length: 30 }, (_, i) => 29 - i),
      ...Array(10).fill(0),
    ]);
  });

  /** Counts the writes the client's socket makes (each a syscall): corked calls go as one. */
  const countWrites = (client: Redis) => {
    const socket = client.stream as unknown as {
      _write: (...a: unknown[]) => void;
      _writev?: (...a: unknown[]) => void;
    };
    const counter = { writes: 0 };
    const write = socket._write.bind(socket);
    const writev = socket._writev?.bind(socket);
    socket._write = (...a) => {
      counter.writes++;
      write(...a);
    };
    if (writev) {
      socket._writev = (...a) => {
        counter.writes++;
        writev(...a);
      };
    }
    return counter;
  };

  it('sends every key’s call of a flush in one write, each decided on its own', async () => {
    const { client, limiter } = await start();
    const policy = policyFor({ perMinute: 2, perDay: 1_000 });
    // The script loaded first: an EVALSHA Redis does not know yet is sent again as EVAL.
    await limiter.consume(`key_${randomUUID()}`, policy, 1);
    const keys = Array.from({ length: 50 }, () => `key_${randomUUID()}`);
    const counter = countWrites(client);
    const decisions = await Promise.all(keys.flatMap((k) => [1, 2, 3].map(() => limiter.consume(k, policy, 1))));
    expect(counter.writes).toBe(1);
    const outcomes = decisions.map((d) => d.outcome);
    expect(outcomes).toEqual(keys.flatMap(() => ['admitted', 'admitted', 'limited']));
  });

  it('sends the next calls of keys whose replies came back together in one write, not one each', async () => {
    const { client, limiter } = await start();
    const policy = policyFor({ perMinute: 2, perDay: 1_000 });
    await limiter.consume(`key_${randomUUID()}`, policy, 1);
    const keys = Array.from({ length: 50 }, () => `key_${randomUUID()}`);
    const first = keys.map((k) => limiter.consume(k, policy, 1));
    // Sent once the flush's turns have passed: every key's first call is out, so these wait behind
    // it and go, as each key's next call, when its reply is back.
    for (let i = 0; i < 4; i++) await turn();
    const counter = countWrites(client);
    const next = keys.flatMap((k) => [limiter.consume(k, policy, 1), limiter.consume(k, policy, 1)]);
    const decisions = await Promise.all([...first, ...next]);
    expect(decisions.map((d) => d.outcome)).toEqual([
      ...keys.map(() => 'admitted'),
      ...keys.flatMap(() => ['admitted', 'limited']),
    ]);
    // 50 calls: one write per batch of replies read together (one read, on loopback), not 50.
    expect(counter.writes).toBeGreaterThanOrEqual(1);
    expect(counter.writes).toBeLessThanOrEqual(5);
  });

  it('fails every request of a key whose call fails, those waiting behind it too, then sends the next anew', async () => {
    const { client, limiter } = await start();
    const keyId = `key_${randomUUID()}`;
    const policy = policyFor({ perMinute: 30 });
    // A window key of the wrong type: the script's INCRBY fails.
    await client.hset(limiter.keyName(keyId, 'm'), 'x', '1');
    const pending = [];
    for (let i = 0; i < 20; i++) {
      pending.push(
        limiter.consume(keyId, policy, 1).then(
          (d) => d.outcome,
          (err: Error) => (err.message.includes('WRONGTYPE') ? 'failed' : err.message),
        ),
      );
      await turn();
    }
    expect(await Promise.all(pending)).toEqual(Array(20).fill('failed'));
    // One request surely behind a failing call: sent three turns after the first, when the
    // first's call has gone out (two lingering turns) and before its answer can be read.
    const first = limiter.consume(keyId, policy, 1);
    for (let i = 0; i < 3; i++) await turn();
    const behind = limiter.consume(keyId, policy, 1);
    await expect(first).rejects.toThrow('WRONGTYPE');
    await expect(behind).rejects.toThrow('WRONGTYPE');
    await client.del(limiter.keyName(keyId, 'm'));
    // The failed requests were not sent again: this one is the window's first.
    const next = await limiter.consume(keyId, policy, 1);
    expect(next.outcome).toBe('admitted');
    expect(next.windows[0]?.remaining).toBe(29);
  });
});

describe('what a key keeps in Redis for its refusals', () => {
  const start = async () => {
    const client = await connected(redisClient(redis.url));
    onTestFinished(() => client.disconnect());
    const prefix = `t${randomUUID().slice(0, 8)}:`;
    const clock = testClock({ client, prefix });
    const history = new RedisUsageHistory(client, prefix, 35 * DAY_MS);
    const ban = { threshold: 3, windowMs: 60_000, durationMs: 900_000, graceMs: 500, minRetryAfterMs: 0 };
    const limiter = new RedisKeyLimiter(client, prefix, ban, clock.now, history);
    onTestFinished(() => history.flush());
    const keys = async () => (await client.keys(`${prefix}*`)).map((k) => k.slice(prefix.length)).sort();
    return { client, clock, limiter, keys };
  };

  it('lets it expire with the Retry-After it counts, not with another window the request would have filled exactly', async () => {
    const { client, clock, limiter } = await start();
    const keyId = `key_${randomUUID()}`;
    const policy = policyFor({ perMinute: 1, perDay: 2 });
    await limiter.consume(keyId, policy, 1);
    await clock.advance(50_000);
    const refused = await limiter.consume(keyId, policy, 1);
    if (refused.outcome !== 'limited') throw new Error(refused.outcome);
    const pending = limiter.keyName(keyId, 'pending');
    // Counted until the minute's end less the grace: its TTL is no longer.
    expect(await client.pttl(pending)).toBeGreaterThan(0);
    expect(await client.pttl(pending)).toBeLessThanOrEqual(refused.retryAfterMs - 500);
    // And it goes by that TTL (a little late on the test's clock: see test-clock.ts).
    await clock.advance(refused.retryAfterMs - 500 + 1_000);
    expect(await client.exists(pending)).toBe(0);
  });

  it('keeps nothing toward a ban for a key that is only admitted: its windows and its history alone', async () => {
    const { clock, limiter, keys } = await start();
    const keyId = `key_${randomUUID()}`;
    const policy = policyFor({ perMinute: 5, perDay: 100 });
    for (let i = 0; i < 5; i++) expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('admitted');
    const day = Math.floor(clock.now() / DAY_MS);
    expect(await keys()).toEqual([`usage:keys:${day}`, `{${keyId}}:h:${day}`, `{${keyId}}:m`].sort());
  });
});

describe('the usage history’s day hash in Redis', () => {
  const NO_BANS = { threshold: 1_000_000, windowMs: 60_000, durationMs: 60_000, graceMs: 0, minRetryAfterMs: 0 };
  const HOUR_MS = 3_600_000;
  const RETENTION_MS = 35 * DAY_MS;
  const policy = policyFor({ perMinute: 100, perDay: 1_000 });

  /**
   * Two replicas on one prefix and one clock: `limiter` may run anything, `noExpiry` is a Redis
   * user denied PEXPIREAT, so a decision of it that would set the history hash's expiry fails.
   */
  const start = async () => {
    const { admin, denied } = await deniedClient('pexpireat');
    const prefix = `t${randomUUID().slice(0, 8)}:`;
    // 10:01 UTC today: its decisions stay in one hour until the test moves on, and the next hour
    // is the same day's. The hash's expiry is an instant weeks ahead whenever the test runs.
    const clock = { at: Math.floor(Date.now() / DAY_MS) * DAY_MS + 10 * HOUR_MS + 60_000 };
    const now = () => clock.at;
    const history = new RedisUsageHistory(admin, prefix, RETENTION_MS);
    const limiter = new RedisKeyLimiter(admin, prefix, NO_BANS, now, history);
    const noExpiry = new RedisKeyLimiter(
      denied,
      prefix,
      NO_BANS,
      now,
      new RedisUsageHistory(denied, prefix, RETENTION_MS),
    );
    // Retention after the end of the hash's UTC day.
    const expiresAt = () => (Math.floor(clock.at / DAY_MS) + 1) * DAY_MS + RETENTION_MS;
    const hash = (keyId: string) => history.dayKey(keyId, Math.floor(clock.at / DAY_MS));
    return { admin, clock, limiter, noExpiry, expiresAt, hash, prefix };
  };

  it('is given its expiry with its first fields; a decision in an hour it already counts sets none', async () => {
    const { admin, limiter, noExpiry, expiresAt, hash } = await start();
    const keyId = `key_${randomUUID()}`;
    expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('admitted');
    expect(await admin.pexpiretime(hash(keyId))).toBe(expiresAt());
    // The hour's fields are there, and the expiry with them: no PEXPIREAT, whatever the cost.
    expect((await noExpiry.consume(keyId, policy, 1)).outcome).toBe('admitted');
    expect((await noExpiry.consume(keyId, policy, 2)).outcome).toBe('admitted');
    expect(await admin.hgetall(hash(keyId))).toMatchObject({ d: '4' });
    expect(await admin.pexpiretime(hash(keyId))).toBe(expiresAt());
  });

  it('sets it again with the next new field: a hash that lost it, or was deleted, gets it back', async () => {
    const { admin, clock, limiter, expiresAt, hash } = await start();
    const keyId = `key_${randomUUID()}`;
    expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('admitted');
    await admin.persist(hash(keyId));
    clock.at += HOUR_MS;
    expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('admitted');
    expect(await admin.pexpiretime(hash(keyId))).toBe(expiresAt());
    await admin.del(hash(keyId));
    expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('admitted');
    expect(await admin.pexpiretime(hash(keyId))).toBe(expiresAt());
  });

  it('sets a customer’s hash’s expiry with its own new fields, whichever of its keys brings them', async () => {
    const { admin, clock, limiter, expiresAt, hash } = await start();
    const customer = `cus_${randomUUID().slice(0, 8)}`;
    const shared = customerPolicyFor({ perMinute: 100, perDay: 1_000 }, undefined, 'fixed', false, DEFAULT_BILLING);
    const [a, b] = [`key_${randomUUID().slice(0, 8)}`, `key_${randomUUID().slice(0, 8)}`];
    expect((await limiter.consume(a, shared, 1, customer)).outcome).toBe('admitted');
    await admin.persist(hash(customer));
    clock.at += HOUR_MS;
    expect((await limiter.consume(b, shared, 1, customer)).outcome).toBe('admitted');
    expect(await admin.pexpiretime(hash(customer))).toBe(expiresAt());
    expect(await admin.hget(hash(customer), 'd')).toBe('2');
  });

  it('counts a key of its own with credits in its day hash alone: its balance gets no fields and no expiry', async () => {
    const { admin, clock, limiter, expiresAt, hash, prefix } = await start();
    const keyId = `key_${randomUUID().slice(0, 8)}`;
    const own = withCredits(policy, {}, UTC_CALENDAR);
    const rule = own.credits as NonNullable<typeof own.credits>;
    const ledger = new RedisCreditLedger(admin, prefix);
    await ledger.add(keyId, rule, { type: 'grant', amount: 5, reason: 'test', ref: 'r', at: clock.at }, clock.at);
    expect((await limiter.consume(keyId, own, 2)).outcome).toBe('admitted');
    const balance = limiter.keyName(keyId, 'credits');
    expect(Object.keys(await admin.hgetall(balance)).sort()).toEqual(['b', 'h', 'i:r', 'm', 'r', 'u']);
    expect(await admin.pttl(balance)).toBe(-1);
    expect(await admin.hgetall(hash(keyId))).toEqual({ d: '2', '10a': '1', '10u': '2' });
    expect(await admin.pexpiretime(hash(keyId))).toBe(expiresAt());
  });
});

describe('calendar windows in Redis', () => {
  const NO_BANS = { threshold: 1_000_000, windowMs: 60_000, durationMs: 60_000, graceMs: 0, minRetryAfterMs: 0 };
  /**
   * A limiter on its own prefix whose clock and Redis's move together (test-clock.ts), from the
   * real now: these windows expire at an instant (PEXPIREAT), and a clock that started ahead of
   * the wall clock (testClock's, in the last hour of a UTC day) would leave them that much longer
   * in Redis than on the clock.
   */
  const start = async (withHistory: boolean) => {
    const client = await connected(redisClient(redis.url));
    onTestFinished(() => client.disconnect());
    const prefix = `t${randomUUID().slice(0, 8)}:`;
    const clock = testClockFrom(Date.now(), { client, prefix });
    const history = withHistory ? new RedisUsageHistory(client, prefix, 35 * DAY_MS) : null;
    return { client, clock, limiter: new RedisKeyLimiter(client, prefix, NO_BANS, clock.now, history) };
  };
  /** 00:00 UTC on the 1st of the month after the one holding `ms`. */
  const nextFirst = (ms: number) => {
    const d = new Date(ms);
    return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  };

  it('keeps a month’s counter in Redis until 00:00 UTC on the 1st, the reset its decisions announce', async () => {
    const { client, clock, limiter } = await start(true);
    const keyId = `key_${randomUUID()}`;
    const decision = await limiter.consume(keyId, policyFor({ perMinute: 100, perMonth: 1_000 }), 1);
    const month = decision.windows.find((w) => w.name === 'month');
    expect(month?.resetAt).toBe(nextFirst(clock.now()));
    expect(await client.pexpiretime(limiter.keyName(keyId, 'mo'))).toBe(nextFirst(clock.now()));
  });

  it('keeps a day’s counter of its own (no usage history) until the next 00:00 UTC', async () => {
    const { client, clock, limiter } = await start(false);
    const keyId = `key_${randomUUID()}`;
    const decision = await limiter.consume(keyId, policyFor({ perMinute: 100, perDay: 1_000 }), 1);
    const midnight = (Math.floor(clock.now() / DAY_MS) + 1) * DAY_MS;
    expect(decision.windows.find((w) => w.name === 'day')?.resetAt).toBe(midnight);
    expect(await client.pexpiretime(limiter.keyName(keyId, 'd'))).toBe(midnight);
  });

  it('gives a spent month back when Redis’s clock passes the 1st, not a minute before', async () => {
    const { clock, limiter } = await start(true);
    const keyId = `key_${randomUUID()}`;
    const policy = policyFor({ perMinute: 100, perMonth: 3 });
    for (let i = 0; i < 3; i++) expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('admitted');
    const refused = await limiter.consume(keyId, policy, 1);
    expect(refused).toMatchObject({ outcome: 'limited', retryAfterMs: nextFirst(clock.now()) - clock.now() });

    const first = nextFirst(clock.now());
    // In a month's last minute, a minute before the 1st is already behind the clock.
    await clock.moveTo(Math.max(clock.now(), first - 60_000));
    expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('limited');
    expect((await limiter.usage(keyId, policy)).windows[1]).toMatchObject({ used: 3, resetAt: first });

    await clock.moveTo(first + 1_000);
    const next = await limiter.consume(keyId, policy, 1);
    expect(next.outcome).toBe('admitted');
    expect(next.windows[1]).toMatchObject({ name: 'month', remaining: 2, resetAt: nextFirst(first) });
  });
});

describe('the index of bans when Redis fails between the script and it', () => {
  const BANS = { threshold: 1, windowMs: 60_000, durationMs: 600_000, graceMs: 0, minRetryAfterMs: 0 };
  const policy = policyFor({ perMinute: 1, perDay: 100 });

  /**
   * A limiter whose Redis user may not ZADD until `allowIndex()`: the ban script runs, the index
   * write after it fails, as when Redis goes away between the two.
   */
  const start = async () => {
    const { admin, denied: client, user } = await deniedClient('zadd');
    const prefix = `t${randomUUID().slice(0, 8)}:`;
    const limiter = new RedisKeyLimiter(client, prefix, BANS);
    // Another replica, whose index writes succeed.
    const other = new RedisKeyLimiter(admin, prefix, BANS);
    const ban = async (keyId: string) => {
      for (const expected of ['admitted', 'limited', 'banned'])
        expect((await limiter.consume(keyId, policy, 1)).outcome).toBe(expected);
    };
    const allowIndex = () => admin.call('ACL', 'SETUSER', user, '+zadd');
    return { limiter, other, ban, allowIndex };
  };

  it('enters a ban its write missed with the next call that succeeds: the ban is in force throughout', async () => {
    const { limiter, ban, allowIndex } = await start();
    const keyId = `key_${randomUUID()}`;
    await ban(keyId);
    expect((await limiter.bans(10)).count).toBe(0);
    expect(await limiter.banEndsAt(keyId)).not.toBeNull();
    await allowIndex();
    // Any key's call that succeeds carries it in.
    expect((await limiter.consume(`key_${randomUUID()}`, policy, 1)).outcome).toBe('admitted');
    await vi.waitFor(async () => expect((await limiter.bans(10)).items.map((b) => b.keyId)).toEqual([keyId]), {
      timeout: 5_000,
      interval: 20,
    });
  });

  it('does not enter a ban lifted meanwhile on another replica', async () => {
    const { limiter, other, ban, allowIndex } = await start();
    const [lifted, kept] = [`key_${randomUUID()}`, `key_${randomUUID()}`];
    await ban(lifted);
    await ban(kept);
    await other.liftBan(lifted);
    await allowIndex();
    expect((await limiter.consume(`key_${randomUUID()}`, policy, 1)).outcome).toBe('admitted');
    await vi.waitFor(async () => expect((await limiter.bans(10)).items.map((b) => b.keyId)).toEqual([kept]), {
      timeout: 5_000,
      interval: 20,
    });
  });
});
