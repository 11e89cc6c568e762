import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type GuardedDecision, GuardedLimiter } from '../src/limits/guarded-limiter.js';
import type { BanPolicy } from '../src/limits/key-limiter.js';
import { MemoryKeyLimiter } from '../src/limits/memory-key-limiter.js';
import { policyFor } from '../src/limits/policy.js';
import { RedisKeyLimiter } from '../src/limits/redis-key-limiter.js';
import { connected, redisClient } from './helpers.js';

// The guard in front of the limiters: a replica's memory of bans, and what happens while the
// shared limiter (Redis) fails. Decisions are what the gate turns into status codes and headers:
// their outcome, where they were taken (`source`, the metrics label) and when a ban ends.

/** One admitted request a minute, banned at the second refusal, for 15 minutes. */
const BAN: BanPolicy = { threshold: 1, windowMs: 60_000, durationMs: 900_000, graceMs: 0 };
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

describe('while the shared limiter fails', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  /** A replica on Redis whose connection the test cuts and restores; its hooks' calls recorded. */
  const replica = async (mode: 'open' | 'closed') => {
    const client = await connected(redisClient(redis.url));
    onTestFinished(() => client.disconnect());
    const calls: string[] = [];
    const guard = new GuardedLimiter(
      {
        kind: 'shared',
        primary: new RedisKeyLimiter(client, `t${randomUUID().slice(0, 8)}:`, BAN, now),
        fallback: new MemoryKeyLimiter(BAN, now),
        mode,
        hooks: {
          onPrimaryError: (_err, first) => calls.push(first ? 'error (first)' : 'error'),
          onRecovered: () => calls.push('recovered'),
        },
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
});
