import { describe, expect, it } from 'vitest';
import { MemoryCreditLedger } from '../../../src/credits/memory-credit-ledger.js';
import { UTC_CALENDAR } from '../../../src/limits/calendar.js';
import { MemoryKeyLimiter } from '../../../src/limits/engines/memory-key-limiter.js';
import type { BanPolicy } from '../../../src/limits/key-limiter.js';
import { policyFor, withCredits } from '../../../src/limits/policy.js';
import { testClock } from '../../support/test-clock.js';
import { limiterContract } from '../limiter.contract.js';

limiterContract('memory', async (ban) => {
  // A clock that moves only when the test moves it: sliding buckets and refusals to the millisecond.
  const clock = testClock();
  const credits = new MemoryCreditLedger();
  return {
    limiter: new MemoryKeyLimiter(ban, clock.now, undefined, credits),
    credits,
    ...clock,
    cleanup: async () => {},
  };
});

// What only the embedded limiter does: its fixed windows live on its own clock (Redis keeps them
// as TTLs in real time), and it bounds the counters it keeps.

const BAN: BanPolicy = { threshold: 1_000_000, windowMs: 60_000, durationMs: 60_000, graceMs: 0, minRetryAfterMs: 0 };

describe('the memory limiter on its own clock', () => {
  it('ends a fixed window exactly its length after its first admission, telling a refusal the time left', async () => {
    let clock = Date.UTC(2026, 10, 26, 12, 0, 0, 250);
    const limiter = new MemoryKeyLimiter(BAN, () => clock);
    const policy = policyFor({ perMinute: 2, perDay: 100 });
    await limiter.consume('k', policy, 1);
    clock += 15_000;
    await limiter.consume('k', policy, 1);
    const refused = await limiter.consume('k', policy, 1);
    expect(refused).toMatchObject({ outcome: 'limited', retryAfterMs: 45_000 });
    expect(refused.windows[0]?.resetAt).toBe(clock + 45_000);
    expect(await limiter.usage('k', policy)).toEqual({
      windows: [
        { name: 'minute', scope: 'key', used: 2, resetAt: clock + 45_000 },
        { name: 'day', scope: 'key', used: 2, resetAt: Date.UTC(2026, 10, 27) },
      ],
      banEndsAt: null,
      refusals: 1,
    });
    clock += 44_999;
    expect((await limiter.consume('k', policy, 1)).outcome).toBe('limited');
    clock += 1;
    const next = await limiter.consume('k', policy, 1);
    expect(next.outcome).toBe('admitted');
    // A new window from this request: a full minute again.
    expect(next.windows[0]).toMatchObject({ remaining: 1, resetAt: clock + 60_000 });
  });

  it('starts no window for a request of cost 0: the first one that costs starts it', async () => {
    let clock = Date.UTC(2026, 10, 26, 12, 0, 0);
    const limiter = new MemoryKeyLimiter(BAN, () => clock);
    for (const policy of [policyFor({ perMinute: 5 }), policyFor({ perMinute: 5 }, 'sliding')]) {
      const keyId = `k-${policy.id}`;
      await limiter.consume(keyId, policy, 0);
      expect((await limiter.usage(keyId, policy)).windows).toEqual([
        { name: 'minute', scope: 'key', used: 0, resetAt: null },
      ]);
      clock += 30_000;
      const first = await limiter.consume(keyId, policy, 1);
      expect(first.windows[0]).toMatchObject({
        remaining: 4,
        resetAt: clock + (policy.windows[0]?.kind === 'sliding' ? 61_000 : 60_000),
      });
    }
  });

  it('ends a ban on its last millisecond', async () => {
    let clock = Date.UTC(2026, 10, 26, 12, 0, 0);
    const limiter = new MemoryKeyLimiter({ ...BAN, threshold: 0, durationMs: 10_000 }, () => clock);
    const policy = policyFor({ perMinute: 1 });
    await limiter.consume('k', policy, 1);
    expect(await limiter.consume('k', policy, 1)).toMatchObject({ outcome: 'banned', banEndsAt: clock + 10_000 });
    clock += 9_999;
    expect(await limiter.banEndsAt('k')).toBe(clock + 1);
    expect(await limiter.consume('k', policy, 1)).toMatchObject({ outcome: 'banned', banEndsAt: clock + 1 });
    clock += 1;
    expect(await limiter.banEndsAt('k')).toBeNull();
  });
});

describe('the memory limiter’s bound on the counters it keeps', () => {
  it('forgets the keys it heard from longest ago once it holds its maximum, keeping the newest', async () => {
    const clock = Date.UTC(2026, 10, 26, 12, 0, 0);
    const limiter = new MemoryKeyLimiter(BAN, () => clock, 10);
    const policy = policyFor({ perMinute: 1 });
    for (let k = 0; k < 21; k++) await limiter.consume(`k${k}`, policy, 1);
    const remembered = [];
    for (let k = 0; k < 21; k++) if ((await limiter.usage(`k${k}`, policy)).windows[0]?.used === 1) remembered.push(k);
    // Each key holds one counter; at 10 the oldest go, down to 9, before the next key's.
    expect(remembered).toEqual([11, 12, 13, 14, 15, 16, 17, 18, 19, 20]);
    // A forgotten key starts a fresh window; a remembered one is still refused.
    expect((await limiter.consume('k0', policy, 1)).outcome).toBe('admitted');
    expect((await limiter.consume('k20', policy, 1)).outcome).toBe('limited');
  });

  it('drops counters whose windows ended before forgetting any live one', async () => {
    let clock = Date.UTC(2026, 10, 26, 12, 0, 0);
    const limiter = new MemoryKeyLimiter(BAN, () => clock, 10);
    const second = policyFor({ perSecond: 1 });
    const minute = policyFor({ perMinute: 1 });
    // Five live keys, then five whose one-second windows end: the oldest counters are live ones.
    for (let k = 0; k < 5; k++) await limiter.consume(`a${k}`, minute, 1);
    for (let k = 0; k < 5; k++) await limiter.consume(`old${k}`, second, 1);
    clock += 1_000;
    for (let k = 0; k < 4; k++) await limiter.consume(`b${k}`, minute, 1);
    for (const key of ['a0', 'a1', 'a2', 'a3', 'a4', 'b0', 'b1', 'b2', 'b3']) {
      expect((await limiter.usage(key, minute)).windows[0]?.used, key).toBe(1);
    }
  });
});

describe('the memory limiter as the fallback, without the balances', () => {
  it('spends no credits and refuses none: the balances are in Redis, out of its reach', async () => {
    const limiter = new MemoryKeyLimiter(BAN, () => Date.UTC(2026, 10, 26, 12));
    const policy = withCredits(policyFor({ perMinute: 2 }), {}, UTC_CALENDAR);
    const outcomes = [];
    for (let i = 0; i < 3; i++) outcomes.push((await limiter.consume('k', policy, 1)).outcome);
    expect(outcomes).toEqual(['admitted', 'admitted', 'limited']);
  });
});
