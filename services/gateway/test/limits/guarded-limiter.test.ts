import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { UTC_CALENDAR } from '../../src/limits/calendar.js';
import { MemoryKeyLimiter } from '../../src/limits/engines/memory-key-limiter.js';
import { RedisKeyLimiter } from '../../src/limits/engines/redis-key-limiter.js';
import { type GuardedDecision, GuardedLimiter, limiterHealthLog } from '../../src/limits/guarded-limiter.js';
import type { BanPolicy } from '../../src/limits/key-limiter.js';
import { customerPolicyFor, policyFor, withCredits } from '../../src/limits/policy.js';
import { HOUR_MS, MemoryUsageHistory } from '../../src/usage/usage-history.js';
import { connected, redisClient } from '../support/helpers.js';

// The guard in front of the limiters: a replica's memory of bans, and what happens while the
// shared limiter (Redis) fails. Decisions are what the gate turns into status codes and headers:
// their outcome, where they were taken (`source`, the metrics label) and when a ban ends.

/** One admitted request a minute, banned at the second refusal, for 15 minutes. */
const BAN: BanPolicy = { threshold: 1, windowMs: 60_000, durationMs: 900_000, graceMs: 0, minRetryAfterMs: 0 };
const POLICY = policyFor({ perMinute: 1, perDay: 100 });

let clock = Date.now();
const now = () => clock;

/** Consumes until the key is banned (one admitted, one limited, then banned); returns the ban's end. */
async function banKey(guard: GuardedLimiter, keyId: string): Promise<number> {
  expect((await guard.consume(keyId, POLICY, 1)).outcome).toBe('admitted');
  expect((await guard.consume(keyId, POLICY, 1)).outcome).toBe('limited');
  const banned = await guard.consume(keyId, POLICY, 1);
  if (banned.outcome !== 'banned') throw new Error(`expected a ban, got ${banned.outcome}`);
  return banned.banEndsAt;
}

const outcome = (d: GuardedDecision) => [d.outcome, d.source];

describe('a replica’s memory of bans', () => {
  /** Two replicas in front of one limiter, as two gateways in front of one Redis. */
  const replicas = () => {
    const shared = new MemoryKeyLimiter(BAN, now);
    return [
      new GuardedLimiter({ kind: 'memory', primary: shared }, now),
      new GuardedLimiter({ kind: 'memory', primary: shared }, now),
    ] as const;
  };

  it('answers a banned key from memory until the ban’s last millisecond, then asks the limiter again', async () => {
    const [guard] = replicas();
    const keyId = randomUUID();
    const endsAt = await banKey(guard, keyId);
    const remembered = await guard.consume(keyId, POLICY, 1);
    expect(remembered).toMatchObject({ outcome: 'banned', source: 'local-ban', banEndsAt: endsAt });
    expect(remembered.outcome === 'banned' && remembered.windows.map((w) => w.name)).toEqual(['minute', 'day']);
    clock = endsAt - 1;
    expect(outcome(await guard.consume(keyId, POLICY, 1))).toEqual(['banned', 'local-ban']);
    // The ban is over (its minute window too): the limiter admits the key again.
    clock = endsAt;
    expect(outcome(await guard.consume(keyId, POLICY, 1))).toEqual(['admitted', 'memory']);
  });

  it('keeps answering from memory after a ban lifted on another replica, until it forgets that ban', async () => {
    const [a, b] = replicas();
    const keyId = randomUUID();
    await banKey(b, keyId);
    await a.liftBan(keyId);
    expect(outcome(await b.consume(keyId, POLICY, 1))).toEqual(['banned', 'local-ban']);
    b.forgetBan(keyId);
    // The minute window is still full: refused, but no longer banned.
    expect(outcome(await b.consume(keyId, POLICY, 1))).toEqual(['limited', 'memory']);
  });

  it('forgets every ban at once when told to', async () => {
    const [a, b] = replicas();
    const [k1, k2] = [randomUUID(), randomUUID()];
    await banKey(b, k1);
    await banKey(b, k2);
    await a.liftBan(k1);
    await a.liftBan(k2);
    b.forgetBans();
    expect(outcome(await b.consume(k1, POLICY, 1))).toEqual(['limited', 'memory']);
    expect(outcome(await b.consume(k2, POLICY, 1))).toEqual(['limited', 'memory']);
  });

  it('lifts a ban on the replica that lifts it at once, in its memory and in the limiter', async () => {
    const [a] = replicas();
    const keyId = randomUUID();
    await banKey(a, keyId);
    await a.liftBan(keyId);
    expect(await a.banEndsAt(keyId)).toBeNull();
    expect(outcome(await a.consume(keyId, POLICY, 1))).toEqual(['limited', 'memory']);
  });

  it('rechecks the bans it remembers: forgets one lifted elsewhere, keeps one still on, follows one renewed', async () => {
    const [a, b] = replicas();
    const [lifted, kept, renewed] = [randomUUID(), randomUUID(), randomUUID()];
    await banKey(b, lifted);
    const keptEnds = await banKey(b, kept);
    await banKey(b, renewed);
    await a.liftBan(lifted);
    // Banned again on the other replica a minute later: the new ban ends a minute later too.
    await a.liftBan(renewed);
    clock += 60_000;
    const renewedEnds = await banKey(a, renewed);
    expect(renewedEnds).toBeGreaterThan(keptEnds);
    await b.recheckBans();
    expect(outcome(await b.consume(lifted, POLICY, 1))[1]).toBe('memory');
    expect(await b.consume(kept, POLICY, 1)).toMatchObject({
      outcome: 'banned',
      source: 'local-ban',
      banEndsAt: keptEnds,
    });
    expect(await b.consume(renewed, POLICY, 1)).toMatchObject({
      outcome: 'banned',
      source: 'local-ban',
      banEndsAt: renewedEnds,
    });
  });

  it('keeps a ban forgotten while its recheck was out forgotten', async () => {
    const [, b] = replicas();
    const keyId = randomUUID();
    await banKey(b, keyId);
    const recheck = b.recheckBans();
    b.forgetBan(keyId);
    await recheck;
    // Still banned in the limiter, which now answers for it.
    expect(outcome(await b.consume(keyId, POLICY, 1))).toEqual(['banned', 'memory']);
  });
});

describe('the usage history of the embedded limiter', () => {
  it('counts what the limiter and the replica’s memory of bans decided: outcomes, forbidden and units', async () => {
    const history = new MemoryUsageHistory(30 * 24 * HOUR_MS, now);
    const guard = new GuardedLimiter({ kind: 'memory', primary: new MemoryKeyLimiter(BAN, now) }, now, history);
    const keyId = randomUUID();
    const policy = policyFor({ perMinute: 3, perDay: 100 });
    const outcomes = [];
    // 3 units admitted, a scope the key lacks (cost 0), a refusal, the ban, and three requests the
    // replica refuses from its memory of the ban: one of them for a scope it lacks.
    for (const cost of [3, 0, 1, 1, 1, 1, 0]) outcomes.push(outcome(await guard.consume(keyId, policy, cost)));
    expect(outcomes).toEqual([
      ['admitted', 'memory'],
      ['admitted', 'memory'],
      ['limited', 'memory'],
      ['banned', 'memory'],
      ['banned', 'local-ban'],
      ['banned', 'local-ban'],
      ['banned', 'local-ban'],
    ]);
    const hour = clock - (clock % HOUR_MS);
    expect(await history.hours(keyId, hour, hour + HOUR_MS)).toEqual([
      { hour, admitted: 1, limited: 1, banned: 3, outOfCredits: 0, forbidden: 2, units: 3, upstreamFailed: 0 },
    ]);
  });

  it('counts a key of a customer in India, and the customer, in its local hours (from :30 past the UTC hour)', async () => {
    const history = new MemoryUsageHistory(30 * 24 * HOUR_MS, now);
    const guard = new GuardedLimiter({ kind: 'memory', primary: new MemoryKeyLimiter(BAN, now) }, now, history);
    const [keyId, customerId] = [randomUUID(), `cus_${randomUUID().slice(0, 16)}`];
    const policy = customerPolicyFor({ perMinute: 1 }, undefined, 'fixed', false, {
      anchorDay: 1,
      timeZone: 'Asia/Kolkata',
    });
    const outcomes = [];
    for (let i = 0; i < 4; i++) outcomes.push(outcome(await guard.consume(keyId, policy, 1, customerId)));
    expect(outcomes.map(([o]) => o)).toEqual(['admitted', 'limited', 'banned', 'banned']);
    const half = 30 * 60_000;
    const hour = clock - ((clock - half) % HOUR_MS);
    const counts = {
      hour,
      admitted: 1,
      limited: 1,
      banned: 2,
      outOfCredits: 0,
      forbidden: 0,
      units: 1,
      upstreamFailed: 0,
    };
    // Read as every reader reads a key of a customer: with its customer (the limiter's decisions
    // are kept as the customer's, where the Redis script keeps them).
    expect(await history.hours(keyId, hour - HOUR_MS, hour + HOUR_MS, customerId)).toEqual([counts]);
    expect(await history.hours(customerId, hour - HOUR_MS, hour + HOUR_MS)).toEqual([counts]);
  });
});

describe('what an operator hears about the shared limiter', () => {
  const hear = (mode: 'open' | 'closed') => {
    const heard: string[] = [];
    let errors = 0;
    const hooks = limiterHealthLog(
      {
        error: (obj, msg) => heard.push(`error ${(obj as { err: Error }).err.message}: ${msg}`),
        warn: (msg) => heard.push(`warn ${msg}`),
      },
      { redisErrors: { inc: () => errors++ } },
      mode,
    );
    return { hooks, heard, errors: () => errors };
  };

  it('in open mode: every failure counted, the first of an outage logged with the fallback, the recovery warned', () => {
    const { hooks, heard, errors } = hear('open');
    hooks.onPrimaryError?.(new Error('timeout'), true);
    hooks.onPrimaryError?.(new Error('timeout'), false);
    hooks.onRecovered?.();
    expect(errors()).toBe(2);
    expect(heard).toEqual([
      'error timeout: Redis rate limiter failing: serving with the per-replica in-memory fallback',
      'warn Redis rate limiter recovered: shared limits are back',
    ]);
  });

  it('in closed mode: the first failure says keyed requests are refused with 503', () => {
    const { hooks, heard, errors } = hear('closed');
    hooks.onPrimaryError?.(new Error('refused'), true);
    expect(errors()).toBe(1);
    expect(heard).toEqual([
      'error refused: Redis rate limiter failing: refusing keyed requests with 503 (RATE_LIMIT_FAILURE_MODE=closed)',
    ]);
  });
});

describe('while the shared limiter fails', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  /** A replica on Redis whose connection the test cuts and restores; its hooks' calls recorded. */
  const replica = async (mode: 'open' | 'closed', withHooks = true) => {
    const client = await connected(redisClient(redis.url));
    onTestFinished(() => client.disconnect());
    const calls: string[] = [];
    const guard = new GuardedLimiter(
      {
        kind: 'shared',
        primary: new RedisKeyLimiter(client, `t${randomUUID().slice(0, 8)}:`, BAN, now),
        fallback: new MemoryKeyLimiter(BAN, now),
        mode,
        ...(withHooks
          ? {
              hooks: {
                onPrimaryError: (_err: unknown, first: boolean) => calls.push(first ? 'error (first)' : 'error'),
                onRecovered: () => calls.push('recovered'),
              },
            }
          : {}),
      },
      now,
    );
    return {
      guard,
      calls,
      cut: async () => {
        const ended = once(client, 'end');
        client.disconnect();
        await ended;
      },
      restore: async () => {
        await client.connect();
      },
    };
  };

  it('serves from the fallback in open mode, tries Redis again 500 ms after a failure, and says when it is back', async () => {
    const { guard, calls, cut, restore } = await replica('open');
    const keyId = randomUUID();
    expect(outcome(await guard.consume(keyId, POLICY, 1))).toEqual(['admitted', 'shared']);
    await cut();
    expect(outcome(await guard.consume(keyId, POLICY, 1))).toEqual(['admitted', 'fallback']);
    expect(calls).toEqual(['error (first)']);
    await restore();
    // Within 500 ms of the failure, Redis is not asked: the fallback answers (its minute is full).
    clock += 499;
    expect(outcome(await guard.consume(keyId, POLICY, 1))).toEqual(['limited', 'fallback']);
    expect(calls).toEqual(['error (first)']);
    clock += 1;
    expect(outcome(await guard.consume(keyId, POLICY, 1))).toEqual(['limited', 'shared']);
    expect(calls).toEqual(['error (first)', 'recovered']);
    expect(outcome(await guard.consume(keyId, POLICY, 1))).toEqual(['banned', 'shared']);
    expect(calls).toEqual(['error (first)', 'recovered']);
    // A later outage is a new one: its first failure is reported as such.
    await cut();
    clock += 1;
    expect(outcome(await guard.consume(randomUUID(), POLICY, 1))).toEqual(['admitted', 'fallback']);
    clock += 500;
    expect(outcome(await guard.consume(randomUUID(), POLICY, 1))).toEqual(['admitted', 'fallback']);
    expect(calls).toEqual(['error (first)', 'recovered', 'error (first)', 'error']);
  });

  it('refuses a request that would spend credits in open mode too, and spools what the fallback decides', async () => {
    const client = await connected(redisClient(redis.url));
    onTestFinished(() => client.disconnect());
    const spooled: string[] = [];
    const guard = new GuardedLimiter(
      {
        kind: 'shared',
        primary: new RedisKeyLimiter(client, `t${randomUUID().slice(0, 8)}:`, BAN, now),
        fallback: new MemoryKeyLimiter(BAN, now),
        mode: 'open',
        spool: { count: (id, o, units) => spooled.push(`${id} ${o} ${units}`) },
      },
      now,
    );
    const ended = once(client, 'end');
    client.disconnect();
    await ended;
    const paying = withCredits(POLICY, {}, UTC_CALENDAR);
    expect(await guard.consume('key_paying', paying, 1)).toEqual({ outcome: 'unavailable', source: 'shared' });
    // At cost 0 (a 403's headers) nothing is spent: the fallback answers.
    expect(outcome(await guard.consume('key_paying', paying, 0))).toEqual(['admitted', 'fallback']);
    expect(outcome(await guard.consume('key_free', POLICY, 1))).toEqual(['admitted', 'fallback']);
    expect(outcome(await guard.consume('key_free', POLICY, 1))).toEqual(['limited', 'fallback']);
    expect(spooled).toEqual(['key_paying forbidden 0', 'key_free admitted 1', 'key_free limited 0']);
  });

  it('reports the limiter unavailable in closed mode, and keeps the bans it remembers through a recheck', async () => {
    const { guard, cut } = await replica('closed');
    const keyId = randomUUID();
    const endsAt = await banKey(guard, keyId);
    await cut();
    expect(await guard.consume(randomUUID(), POLICY, 1)).toEqual({ outcome: 'unavailable', source: 'shared' });
    // A recheck asks nothing of a failing Redis, and forgets nothing.
    await guard.recheckBans();
    expect(await guard.consume(keyId, POLICY, 1)).toMatchObject({
      outcome: 'banned',
      source: 'local-ban',
      banEndsAt: endsAt,
    });
  });

  it('serves from the fallback in open mode without hooks to tell, and from Redis once it is back', async () => {
    const { guard, cut, restore } = await replica('open', false);
    await cut();
    const keyId = randomUUID();
    expect(outcome(await guard.consume(keyId, POLICY, 1))).toEqual(['admitted', 'fallback']);
    expect(outcome(await guard.consume(keyId, POLICY, 1))).toEqual(['limited', 'fallback']);
    await restore();
    clock += 500;
    expect(outcome(await guard.consume(keyId, POLICY, 1))).toEqual(['admitted', 'shared']);
  });

  it('leaves the shared limiter’s decisions to its script’s history, counting only the bans it answers itself', async () => {
    const client = await connected(redisClient(redis.url));
    onTestFinished(() => client.disconnect());
    const history = new MemoryUsageHistory(30 * 24 * HOUR_MS, now);
    const guard = new GuardedLimiter(
      {
        kind: 'shared',
        primary: new RedisKeyLimiter(client, `t${randomUUID().slice(0, 8)}:`, BAN, now),
        fallback: new MemoryKeyLimiter(BAN, now),
        mode: 'open',
      },
      now,
      history,
    );
    const keyId = randomUUID();
    await banKey(guard, keyId);
    expect(outcome(await guard.consume(keyId, POLICY, 1))).toEqual(['banned', 'local-ban']);
    const hour = clock - (clock % HOUR_MS);
    expect(await history.hours(keyId, hour, hour + HOUR_MS)).toEqual([
      { hour, admitted: 0, limited: 0, banned: 1, outOfCredits: 0, forbidden: 0, units: 0, upstreamFailed: 0 },
    ]);
  });

  it('lifts a ban the fallback took while Redis was down, not only the shared one', async () => {
    const { guard, cut } = await replica('open');
    const keyId = randomUUID();
    await cut();
    await banKey(guard, keyId);
    expect(outcome(await guard.consume(keyId, POLICY, 1))).toEqual(['banned', 'fallback']);
    // The lift reaches the fallback though Redis is down; the minute window is still full.
    await guard.liftBan(keyId).catch(() => {});
    expect(outcome(await guard.consume(keyId, POLICY, 1))).toEqual(['limited', 'fallback']);
  });

  it('reports a key’s usage and ban as the shared limiter holds them', async () => {
    const { guard } = await replica('open');
    const keyId = randomUUID();
    expect(await guard.banEndsAt(keyId)).toBeNull();
    const endsAt = await banKey(guard, keyId);
    // Redis keeps the ban as a TTL, read back a few ms later in real time.
    const near = (at: number | null) => expect(at).toSatisfy((t: number) => t <= endsAt && t > endsAt - 1_000);
    near(await guard.banEndsAt(keyId));
    const usage = await guard.usage(keyId, POLICY);
    expect(usage.windows.map((w) => [w.name, w.used])).toEqual([
      ['minute', 1],
      ['day', 1],
    ]);
    near(usage.banEndsAt);
  });
});
