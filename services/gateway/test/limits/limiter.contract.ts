import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import type { CreditLedger } from '../../src/credits/credit-ledger.js';
import { type BanPolicy, type Decision, type KeyLimiter, PENDING_BUCKET_MS } from '../../src/limits/key-limiter.js';
import { type LimitPolicy, type Limits, periodEnd, policyFor } from '../../src/limits/policy.js';
import { type FleetClient, fleets, runFleet, type TimedAnswer } from '../support/clients.js';
import { creditsContract } from './credits.contract.js';
import { customerWindowsContract } from './customer-windows.contract.js';

export interface LimiterHarness {
  limiter: KeyLimiter;
  /** The balances the limiter spends credits from. */
  credits: CreditLedger;
  /** The limiter's clock. */
  now(): number;
  /**
   * Moves the limiter's clock forward, and time with it for what the limiter keeps: sliding windows
   * slide, calendar periods turn, and state whose time is up goes as it would (a Redis TTL runs
   * out), never sooner.
   */
  advance(ms: number): Promise<void>;
  cleanup(): Promise<void>;
}

/** The spec's shape of limits (fixed windows) as a policy, the way a key of a built-in plan has it. */
const fixed = (limits: Limits): LimitPolicy => policyFor(limits);

/** Every refusal counts for its whole Retry-After, which is the windows' own wait. */
const BAN: BanPolicy = { threshold: 3, windowMs: 60_000, durationMs: 900_000, graceMs: 0, minRetryAfterMs: 0 };
/** For tests that probe a full window many times: no ban gets in their way. */
const NO_BANS: BanPolicy = { ...BAN, threshold: 1_000_000 };
/**
 * Past a fixed window's end. Redis ends it by its TTL, which follows the test's clock a little late
 * (by up to the wall-clock time the test spent between two moves of it, more on a busy machine: see
 * test-clock.ts); the limiter's own decisions follow the clock to the millisecond.
 */
const TTL_LAG = 1_000;
const MINUTE_ENDED = 60_000 + TTL_LAG;
/** The gateway's own (config.ts): what fleets of clients sharing a key meet. */
const DEFAULT_BAN: BanPolicy = loadConfig({}).ban;

function window(decision: Decision, name: string) {
  const w = decision.windows.find((x) => x.name === name);
  if (!w) throw new Error(`no ${name} window`);
  return w;
}

let counter = 0;
const newKeyId = () => `key_contract_${process.pid}_${Date.now()}_${counter++}`;

/**
 * The decision rules both limiters must follow identically (docs/limits-and-bans.md); with them,
 * those of customers' shared windows (customer-windows.contract.ts) and of credits (credits.contract.ts).
 */
export function limiterContract(name: string, make: (ban: BanPolicy) => Promise<LimiterHarness>): void {
  customerWindowsContract(name, make);
  creditsContract(name, make);
  describe(`${name} limiter contract`, () => {
    let harness: LimiterHarness | undefined;
    const start = async (ban = BAN) => {
      harness = await make(ban);
      return harness;
    };
    afterEach(async () => {
      await harness?.cleanup();
      harness = undefined;
    });

    it('admits exactly the minute limit, counting down, then refuses with the time to the reset', async () => {
      const { limiter } = await start();
      const keyId = newKeyId();
      const limits = { perMinute: 5, perDay: 100 };
      const remaining: number[] = [];
      for (let i = 0; i < 5; i++) {
        const d = await limiter.consume(keyId, fixed(limits), 1);
        expect(d.outcome).toBe('admitted');
        remaining.push(window(d, 'minute').remaining);
      }
      expect(remaining).toEqual([4, 3, 2, 1, 0]);
      const refused = await limiter.consume(keyId, fixed(limits), 1);
      expect(refused.outcome).toBe('limited');
      if (refused.outcome !== 'limited') return;
      expect(refused.retryAfterMs).toBeGreaterThan(0);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(60_000);
      expect(window(refused, 'minute').remaining).toBe(0);
      expect(window(refused, 'day').remaining).toBe(95);
    });

    it('counts only admitted requests: minute refusals leave the day window alone', async () => {
      const { limiter, advance } = await start();
      const keyId = newKeyId();
      const limits = { perMinute: 3, perDay: 10 };
      for (let i = 0; i < 3; i++) await limiter.consume(keyId, fixed(limits), 1);
      for (let i = 0; i < 3; i++) expect((await limiter.consume(keyId, fixed(limits), 1)).outcome).toBe('limited');
      await advance(MINUTE_ENDED);
      const next = await limiter.consume(keyId, fixed(limits), 1);
      expect(next.outcome).toBe('admitted');
      expect(window(next, 'minute').remaining).toBe(2);
      expect(window(next, 'day').remaining).toBe(6);
    });

    it('lets the day window bind and refuse without consuming from the minute window', async () => {
      const { limiter, now } = await start();
      const keyId = newKeyId();
      const limits = { perMinute: 10, perDay: 5 };
      for (let i = 0; i < 5; i++) expect((await limiter.consume(keyId, fixed(limits), 1)).outcome).toBe('admitted');
      const refused = await limiter.consume(keyId, fixed(limits), 1);
      expect(refused.outcome).toBe('limited');
      if (refused.outcome !== 'limited') return;
      expect(window(refused, 'day').remaining).toBe(0);
      expect(window(refused, 'minute').remaining).toBe(5);
      // The day is a calendar quota: the wait is until 00:00 UTC.
      expect(Math.abs(refused.retryAfterMs - (periodEnd('day', now()) - now()))).toBeLessThan(1_000);
    });

    it(`bans a key after more than ${BAN.threshold} refusals, until the ban ends`, async () => {
      const { limiter, now } = await start();
      const keyId = newKeyId();
      const limits = { perMinute: 1, perDay: 100 };
      expect((await limiter.consume(keyId, fixed(limits), 1)).outcome).toBe('admitted');
      for (let i = 0; i < BAN.threshold; i++)
        expect((await limiter.consume(keyId, fixed(limits), 1)).outcome).toBe('limited');
      const banned = await limiter.consume(keyId, fixed(limits), 1);
      expect(banned.outcome).toBe('banned');
      if (banned.outcome !== 'banned') return;
      expect(banned.banEndsAt - now()).toBeGreaterThan(BAN.durationMs - 5_000);
      expect(banned.banEndsAt - now()).toBeLessThanOrEqual(BAN.durationMs + 1_000);
      expect((await limiter.consume(keyId, fixed(limits), 1)).outcome).toBe('banned');
      expect(await limiter.banEndsAt(keyId)).toBeGreaterThan(now());
    });

    it('names one end for a ban, however often, however and whenever it is read', async () => {
      const { limiter, advance } = await start();
      const keyId = newKeyId();
      const limits = { perMinute: 1, perDay: 100 };
      await limiter.consume(keyId, fixed(limits), 1);
      for (let i = 0; i < BAN.threshold; i++) await limiter.consume(keyId, fixed(limits), 1);
      const banned = await limiter.consume(keyId, fixed(limits), 1);
      if (banned.outcome !== 'banned') throw new Error(`expected a ban, got ${banned.outcome}`);
      const ends = banned.banEndsAt;
      // A console showing seconds must not see 05:25:59 on one read and 05:26:00 on the next.
      for (const ms of [0, 1, 499, 1_500]) {
        await advance(ms);
        const again = await limiter.consume(keyId, fixed(limits), 1);
        expect(again).toMatchObject({ outcome: 'banned', banEndsAt: ends });
        expect(await limiter.banEndsAt(keyId)).toBe(ends);
        expect((await limiter.usage(keyId, fixed(limits))).banEndsAt).toBe(ends);
      }
    });

    it('lifting a ban also forgets the refusals counted towards the next one', async () => {
      const { limiter, advance } = await start();
      const keyId = newKeyId();
      const limits = { perMinute: 1, perDay: 100 };
      await limiter.consume(keyId, fixed(limits), 1);
      for (let i = 0; i <= BAN.threshold; i++) await limiter.consume(keyId, fixed(limits), 1);
      expect((await limiter.consume(keyId, fixed(limits), 1)).outcome).toBe('banned');
      await limiter.liftBan(keyId);
      expect(await limiter.banEndsAt(keyId)).toBeNull();
      // Minute window still exhausted: refused, but the refusal count starts again from zero.
      for (let i = 0; i < BAN.threshold; i++)
        expect((await limiter.consume(keyId, fixed(limits), 1)).outcome).toBe('limited');
      expect((await limiter.consume(keyId, fixed(limits), 1)).outcome).toBe('banned');
      await limiter.liftBan(keyId);
      await advance(MINUTE_ENDED);
      expect((await limiter.consume(keyId, fixed(limits), 1)).outcome).toBe('admitted');
    });

    it('counts the bans in force across keys, soonest end first, and forgets one lifted or ended', async () => {
      const { limiter, advance, now } = await start();
      const limits = { perMinute: 1, perDay: 100 };
      const refuse = async (keyId: string, times: number) => {
        let last: Decision | undefined;
        for (let i = 0; i < times; i++) last = await limiter.consume(keyId, fixed(limits), 1);
        return last;
      };
      expect(await limiter.bans(10)).toEqual({ count: 0, items: [] });
      const [a, b, c, spared] = [newKeyId(), newKeyId(), newKeyId(), newKeyId()];
      const ends: number[] = [];
      for (const keyId of [a, b, c]) {
        // One admitted, then one refusal more than the threshold: banned, until the decision says.
        const banned = await refuse(keyId, BAN.threshold + 2);
        if (banned?.outcome !== 'banned') throw new Error(`${keyId} not banned: ${banned?.outcome}`);
        ends.push(banned.banEndsAt);
        await advance(1_000);
      }
      // As many refusals as the threshold: refused, not banned, not counted.
      await refuse(spared, BAN.threshold + 1);
      expect(await limiter.banEndsAt(spared)).toBeNull();
      expect(await limiter.bans(10)).toEqual({
        count: 3,
        items: [
          { keyId: a, endsAt: ends[0] },
          { keyId: b, endsAt: ends[1] },
          { keyId: c, endsAt: ends[2] },
        ],
      });
      // A shorter list still counts them all.
      expect(await limiter.bans(1)).toEqual({ count: 3, items: [{ keyId: a, endsAt: ends[0] }] });
      await limiter.liftBan(b);
      expect((await limiter.bans(10)).items.map((x) => x.keyId)).toEqual([a, c]);
      // The first ban ends, a millisecond ago; the last one still runs for two seconds.
      await advance((ends[0] as number) - now() + 1);
      expect(await limiter.bans(10)).toEqual({ count: 1, items: [{ keyId: c, endsAt: ends[2] }] });
      await advance((ends[2] as number) - now() + 1);
      expect(await limiter.bans(10)).toEqual({ count: 0, items: [] });
    });

    it('keeps keys apart', async () => {
      const { limiter } = await start();
      const [a, b] = [newKeyId(), newKeyId()];
      const limits = { perMinute: 1, perDay: 10 };
      expect((await limiter.consume(a, fixed(limits), 1)).outcome).toBe('admitted');
      expect((await limiter.consume(a, fixed(limits), 1)).outcome).toBe('limited');
      expect((await limiter.consume(b, fixed(limits), 1)).outcome).toBe('admitted');
    });

    it('admits exactly the limit under 150 concurrent requests', async () => {
      const { limiter } = await start();
      const keyId = newKeyId();
      const limits = { perMinute: 60, perDay: 1_000 };
      const decisions = await Promise.all(Array.from({ length: 150 }, () => limiter.consume(keyId, fixed(limits), 1)));
      const outcomes = decisions.map((d) => d.outcome);
      expect(outcomes.filter((o) => o === 'admitted')).toHaveLength(60);
      // 90 refusals pass the ban threshold: the first few are limited, the rest banned.
      expect(outcomes.filter((o) => o === 'limited')).toHaveLength(BAN.threshold);
      expect(outcomes.filter((o) => o === 'banned')).toHaveLength(90 - BAN.threshold);
      const after = await limiter.consume(newKeyId(), fixed(limits), 1);
      expect(window(after, 'day').remaining).toBe(999);
      const dayRemaining = decisions.map((d) => window(d, 'day').remaining);
      expect(Math.min(...dayRemaining)).toBe(940);
    });

    it('keeps every window a plan can have, shortest first, day and month as UTC calendar quotas', async () => {
      const { limiter, now } = await start();
      const keyId = newKeyId();
      const policy = policyFor({ perSecond: 3, perMinute: 10, perHour: 20, perDay: 30, perMonth: 40 });
      const d = await limiter.consume(keyId, policy, 1);
      expect(d.outcome).toBe('admitted');
      expect(d.windows.map((w) => [w.name, w.limit, w.remaining])).toEqual([
        ['second', 3, 2],
        ['minute', 10, 9],
        ['hour', 20, 19],
        ['day', 30, 29],
        ['month', 40, 39],
      ]);
      const at = now();
      expect(Math.abs(window(d, 'day').resetAt - periodEnd('day', at))).toBeLessThan(1_000);
      expect(Math.abs(window(d, 'month').resetAt - periodEnd('month', at))).toBeLessThan(1_000);
      expect(window(d, 'second').resetAt - at).toBeLessThanOrEqual(1_000);
      expect(window(d, 'hour').resetAt - at).toBeGreaterThan(3_590_000);
      for (let i = 0; i < 2; i++) expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('admitted');
      const refused = await limiter.consume(keyId, policy, 1);
      expect(refused.outcome).toBe('limited');
      expect(window(refused, 'second').remaining).toBe(0);
      expect(window(refused, 'month').remaining).toBe(37);
      const usage = await limiter.usage(keyId, policy);
      expect(usage.windows.map((w) => [w.name, w.used])).toEqual([
        ['second', 3],
        ['minute', 3],
        ['hour', 3],
        ['day', 3],
        ['month', 3],
      ]);
    });

    it('takes a request’s cost from every window; one costing more than remains is refused and takes nothing', async () => {
      const { limiter } = await start();
      const keyId = newKeyId();
      const policy = fixed({ perMinute: 12, perDay: 100 });
      expect(window(await limiter.consume(keyId, policy, 5), 'minute').remaining).toBe(7);
      expect(window(await limiter.consume(keyId, policy, 5), 'day').remaining).toBe(90);
      const refused = await limiter.consume(keyId, policy, 5);
      expect(refused.outcome).toBe('limited');
      expect(window(refused, 'minute').remaining).toBe(2);
      expect(window(refused, 'day').remaining).toBe(90);
      // A cheaper request still fits what the refused one left.
      const cheap = await limiter.consume(keyId, policy, 2);
      expect(cheap.outcome).toBe('admitted');
      expect(window(cheap, 'minute').remaining).toBe(0);
      const usage = await limiter.usage(keyId, policy);
      expect(usage.windows.map((w) => w.used)).toEqual([12, 12]);
    });

    it('decides a batch of mixed costs in order, as single requests would be', async () => {
      const { limiter } = await start();
      const keyId = newKeyId();
      const policy = fixed({ perMinute: 10, perDay: 100 });
      const costs = [4, 4, 4, 1, 1, 3];
      const decisions = await Promise.all(costs.map((cost) => limiter.consume(keyId, policy, cost)));
      expect(decisions.map((d) => d.outcome)).toEqual([
        'admitted',
        'admitted',
        'limited',
        'admitted',
        'admitted',
        'limited',
      ]);
      expect(decisions.map((d) => window(d, 'minute').remaining)).toEqual([6, 2, 2, 1, 0, 0]);
    });

    it('refuses a request costing more than a window’s whole limit, telling it to wait a whole window', async () => {
      const { limiter } = await start();
      const keyId = newKeyId();
      const refused = await limiter.consume(keyId, fixed({ perMinute: 3, perDay: 100 }), 5);
      expect(refused.outcome).toBe('limited');
      if (refused.outcome !== 'limited') return;
      expect(refused.retryAfterMs).toBe(60_000);
    });

    it('answers a request of cost 0 with the windows as they are: never refused, never a strike', async () => {
      const { limiter } = await start();
      const keyId = newKeyId();
      const policy = fixed({ perMinute: 2, perDay: 100 });
      await limiter.consume(keyId, policy, 2);
      for (let i = 0; i < BAN.threshold + 3; i++) {
        const d = await limiter.consume(keyId, policy, 0);
        expect(d.outcome).toBe('admitted');
        expect(window(d, 'minute').remaining).toBe(0);
      }
      expect((await limiter.usage(keyId, policy)).refusals).toBe(0);
      // A smaller limit than the key has used (a plan change down): still no strike.
      expect((await limiter.consume(keyId, fixed({ perMinute: 1, perDay: 100 }), 0)).outcome).toBe('admitted');
      expect((await limiter.usage(keyId, policy)).refusals).toBe(0);
    });

    it('in shadow mode decides as ever but counts no refusal toward a ban', async () => {
      const { limiter } = await start();
      const keyId = newKeyId();
      const shadow = policyFor({ perMinute: 2, perDay: 100 }, 'fixed', true);
      const outcomes: string[] = [];
      for (let i = 0; i < 2 + BAN.threshold * 3; i++) outcomes.push((await limiter.consume(keyId, shadow, 1)).outcome);
      expect(outcomes.filter((o) => o === 'admitted')).toHaveLength(2);
      expect(outcomes.filter((o) => o === 'limited')).toHaveLength(BAN.threshold * 3);
      expect(await limiter.banEndsAt(keyId)).toBeNull();
      expect((await limiter.usage(keyId, shadow)).refusals).toBe(0);
    });

    it('sliding: bursts placed at bucket and window edges never put more than the limit in any span of the window', async () => {
      const { limiter, now, advance } = await start(NO_BANS);
      const keyId = newKeyId();
      const limit = 10;
      const policy = policyFor({ perMinute: limit }, 'sliding');
      // Align to just before a bucket boundary, then hammer at the edges: the last millisecond of a
      // bucket, its first, and every 250 ms between, for a little over two windows.
      await advance(1_000 - (now() % 1_000) - 1);
      const admittedAt: number[] = [];
      const start0 = now();
      let t = 0;
      while (t < 130_000) {
        for (let i = 0; i < 3; i++) {
          const d = await limiter.consume(keyId, policy, 1);
          if (d.outcome === 'admitted') admittedAt.push(now());
          else break;
        }
        const step = t % 1_000 === 0 ? 1 : t % 1_000 === 1 ? 249 : 250;
        await advance(step);
        t = now() - start0;
      }
      expect(admittedAt.length).toBeGreaterThan(limit);
      for (const at of admittedAt) {
        const inSpan = admittedAt.filter((x) => x > at - 60_000 && x <= at).length;
        expect(inSpan, `admitted in the minute up to ${at - start0} ms`).toBeLessThanOrEqual(limit);
      }
      // Capacity comes back at most one bucket (1 s, 1/60 of the window) after a minute has passed.
      const first = admittedAt[0] as number;
      const eleventh = admittedAt[limit] as number;
      expect(eleventh - first).toBeGreaterThanOrEqual(60_000);
      expect(eleventh - first).toBeLessThanOrEqual(61_000 + 250);
    });

    it('fixed, by contrast: a window starting at the first request admits its limit again right after it resets', async () => {
      const { limiter, advance } = await start();
      const keyId = newKeyId();
      const policy = fixed({ perMinute: 5, perDay: 100 });
      for (let i = 0; i < 5; i++) expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('admitted');
      await advance(MINUTE_ENDED);
      for (let i = 0; i < 5; i++) expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('admitted');
    });

    it('sliding: a refusal says when the oldest requests slide out, and the reset reports it', async () => {
      const { limiter, now, advance } = await start(NO_BANS);
      const keyId = newKeyId();
      const policy = policyFor({ perMinute: 4, perDay: 100 }, 'sliding');
      await advance(1_000 - (now() % 1_000));
      const startedAt = now();
      for (let i = 0; i < 2; i++) await limiter.consume(keyId, policy, 1);
      await advance(10_000);
      for (let i = 0; i < 2; i++) await limiter.consume(keyId, policy, 1);
      const refused = await limiter.consume(keyId, policy, 1);
      expect(refused.outcome).toBe('limited');
      if (refused.outcome !== 'limited') return;
      // The first two leave once their bucket is a whole minute old: 61 s after they came.
      const expected = startedAt + 61_000 - now();
      expect(Math.abs(refused.retryAfterMs - expected)).toBeLessThanOrEqual(1);
      expect(Math.abs(window(refused, 'minute').resetAt - (startedAt + 61_000))).toBeLessThanOrEqual(1);
      // A request of cost 2 fits once the first pair has left; one of cost 3 must wait for the second pair too.
      const two = await limiter.consume(keyId, policy, 2);
      if (two.outcome !== 'limited') throw new Error(two.outcome);
      expect(two.retryAfterMs).toBe(expected);
      const costly = await limiter.consume(keyId, policy, 3);
      if (costly.outcome !== 'limited') throw new Error(costly.outcome);
      expect(Math.abs(costly.retryAfterMs - (startedAt + 71_000 - now()))).toBeLessThanOrEqual(1);
      await advance(expected - 1);
      expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('limited');
      await advance(1);
      expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('admitted');
    });

    it('sliding: admits exactly the limit under 150 concurrent requests', async () => {
      const { limiter } = await start();
      const keyId = newKeyId();
      const policy = policyFor({ perSecond: 40, perMinute: 60 }, 'sliding');
      const decisions = await Promise.all(Array.from({ length: 150 }, () => limiter.consume(keyId, policy, 1)));
      expect(decisions.filter((d) => d.outcome === 'admitted')).toHaveLength(40);
      expect((await limiter.usage(keyId, policy)).windows.map((w) => w.used)).toEqual([40, 40]);
    });

    it('sliding: a request costing the whole limit waits until the buckets in its way leave, not a whole window', async () => {
      const { limiter, now, advance } = await start(NO_BANS);
      const keyId = newKeyId();
      const policy = policyFor({ perMinute: 3 }, 'sliding');
      await advance(1_000 - (now() % 1_000));
      const startedAt = now();
      await limiter.consume(keyId, policy, 1);
      await advance(10_000);
      const refused = await limiter.consume(keyId, policy, 3);
      if (refused.outcome !== 'limited') throw new Error(refused.outcome);
      // The one unit leaves with its bucket, 61 s after it came: then 3 fit.
      expect(refused.retryAfterMs).toBe(startedAt + 61_000 - now());
      await advance(refused.retryAfterMs);
      expect((await limiter.consume(keyId, policy, 3)).outcome).toBe('admitted');
    });

    it('reports a key’s usage without counting it: what each window holds, when it resets, refusals and ban', async () => {
      const { limiter, now } = await start();
      const keyId = newKeyId();
      const policy = fixed({ perMinute: 2, perDay: 100 });
      expect(await limiter.usage(keyId, policy)).toEqual({
        windows: [
          { name: 'minute', scope: 'key', used: 0, resetAt: null },
          { name: 'day', scope: 'key', used: 0, resetAt: null },
        ],
        banEndsAt: null,
        refusals: 0,
      });
      await limiter.consume(keyId, policy, 2);
      await limiter.consume(keyId, policy, 1);
      await limiter.consume(keyId, policy, 1);
      const usage = await limiter.usage(keyId, policy);
      expect(usage.windows.map((w) => [w.name, w.used])).toEqual([
        ['minute', 2],
        ['day', 2],
      ]);
      const minuteReset = usage.windows[0]?.resetAt ?? 0;
      expect(minuteReset).toBeGreaterThan(now() + 55_000);
      expect(minuteReset).toBeLessThanOrEqual(now() + 60_000);
      expect(usage.windows[1]?.resetAt).toBe(periodEnd('day', now()));
      expect(usage.refusals).toBe(2);
      expect(usage.banEndsAt).toBeNull();
      // Reading changed nothing.
      expect(await limiter.usage(keyId, policy)).toMatchObject({ refusals: 2 });
    });

    it('sliding: reports when the oldest bucket of a window leaves as its reset', async () => {
      const { limiter, now, advance } = await start(NO_BANS);
      const keyId = newKeyId();
      const policy = policyFor({ perMinute: 10 }, 'sliding');
      await advance(1_000 - (now() % 1_000) + 250);
      const startedAt = now();
      await limiter.consume(keyId, policy, 1);
      await advance(5_000);
      await limiter.consume(keyId, policy, 2);
      expect((await limiter.usage(keyId, policy)).windows).toEqual([
        { name: 'minute', scope: 'key', used: 3, resetAt: startedAt - 250 + 61_000 },
      ]);
      // Once that bucket has left, the next one's time is the reset.
      await advance(56_000);
      expect((await limiter.usage(keyId, policy)).windows).toEqual([
        { name: 'minute', scope: 'key', used: 2, resetAt: startedAt - 250 + 66_000 },
      ]);
    });

    it('marks the one decision that started a ban with the refusals it took, and reports the ban', async () => {
      const { limiter } = await start();
      const keyId = newKeyId();
      const policy = fixed({ perMinute: 1, perDay: 100 });
      const decisions = [];
      for (let i = 0; i < BAN.threshold + 3; i++) decisions.push(await limiter.consume(keyId, policy, 1));
      expect(decisions.map((d) => d.outcome)).toEqual([
        'admitted',
        ...Array(BAN.threshold).fill('limited'),
        'banned',
        'banned',
      ]);
      const [first, after] = decisions.slice(-2);
      if (first?.outcome !== 'banned' || after?.outcome !== 'banned') throw new Error('expected bans');
      expect(first.started).toEqual({ refusals: BAN.threshold + 1 });
      expect(after.started).toBeUndefined();
      // Both report the windows as they stand and the same end, give or take Redis's real-time TTL.
      expect(after.windows.map((w) => [w.name, w.remaining])).toEqual([
        ['minute', 0],
        ['day', 99],
      ]);
      expect(Math.abs(after.banEndsAt - first.banEndsAt)).toBeLessThan(1_000);
      const usage = await limiter.usage(keyId, policy);
      expect(Math.abs((usage.banEndsAt ?? 0) - first.banEndsAt)).toBeLessThan(1_000);
      expect(usage.refusals).toBe(0);
    });

    it('tells a refusal to wait for the windows that refused it only, not one the request would fill exactly', async () => {
      const { limiter } = await start();
      const keyId = newKeyId();
      const policy = fixed({ perMinute: 2, perDay: 3 });
      for (let i = 0; i < 2; i++) expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('admitted');
      // The day would hold exactly 3 with this one: it does not refuse, and its reset is hours away.
      const refused = await limiter.consume(keyId, policy, 1);
      if (refused.outcome !== 'limited') throw new Error(refused.outcome);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(60_000);
    });

    it('tells a refusal in a batch to wait for the window that the requests admitted with it filled', async () => {
      const { limiter } = await start();
      const keyId = newKeyId();
      const policy = fixed({ perMinute: 4, perDay: 100 });
      const decisions = await Promise.all([2, 2, 1].map((cost) => limiter.consume(keyId, policy, cost)));
      expect(decisions.map((d) => d.outcome)).toEqual(['admitted', 'admitted', 'limited']);
      const refused = decisions[2];
      if (refused?.outcome !== 'limited') throw new Error('expected a refusal');
      expect(refused.retryAfterMs).toBeGreaterThan(55_000);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(60_000);
    });

    it('sliding: a request costing more than the whole limit waits a whole window, on a fresh key or a used one', async () => {
      const { limiter, now, advance } = await start(NO_BANS);
      const keyId = newKeyId();
      const policy = policyFor({ perMinute: 3 }, 'sliding');
      await advance(1_000 - (now() % 1_000));
      // Fresh: the window's reset, a window and this bucket from now.
      const fresh = await limiter.consume(keyId, policy, 4);
      if (fresh.outcome !== 'limited') throw new Error(fresh.outcome);
      expect(fresh.retryAfterMs).toBe(61_000);
      await limiter.consume(keyId, policy, 1);
      await advance(10_000);
      // Its one unit leaves in 51 s; 4 never fit, so the wait is a whole window, not that.
      const used = await limiter.consume(keyId, policy, 4);
      if (used.outcome !== 'limited') throw new Error(used.outcome);
      expect(used.retryAfterMs).toBe(60_000);
    });

    it('sliding: a costly refusal by a later window waits for as many of its buckets as it needs', async () => {
      const { limiter, now, advance } = await start(NO_BANS);
      const keyId = newKeyId();
      const policy = policyFor({ perSecond: 10, perMinute: 4 }, 'sliding');
      await advance(1_000 - (now() % 1_000));
      const startedAt = now();
      for (let i = 0; i < 2; i++) await limiter.consume(keyId, policy, 1);
      await advance(10_000);
      for (let i = 0; i < 2; i++) await limiter.consume(keyId, policy, 1);
      // 3 more fit the minute once both pairs have left: 71 s after the first.
      const refused = await limiter.consume(keyId, policy, 3);
      if (refused.outcome !== 'limited') throw new Error(refused.outcome);
      expect(refused.retryAfterMs).toBe(startedAt + 71_000 - now());
    });

    it('sliding: reports no reset for a window that holds nothing', async () => {
      const { limiter } = await start();
      const policy = policyFor({ perSecond: 2, perMinute: 5 }, 'sliding');
      expect((await limiter.usage(newKeyId(), policy)).windows).toEqual([
        { name: 'second', scope: 'key', used: 0, resetAt: null },
        { name: 'minute', scope: 'key', used: 0, resetAt: null },
      ]);
    });

    it('lifting a ban forgets the refusals counted toward one even when no ban is on', async () => {
      const { limiter } = await start();
      const keyId = newKeyId();
      const policy = fixed({ perMinute: 1, perDay: 100 });
      await limiter.consume(keyId, policy, 1);
      for (let i = 0; i < BAN.threshold; i++) await limiter.consume(keyId, policy, 1);
      expect((await limiter.usage(keyId, policy)).refusals).toBe(BAN.threshold);
      await limiter.liftBan(keyId);
      expect((await limiter.usage(keyId, policy)).refusals).toBe(0);
      expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('limited');
    });

    it('decides many keys arriving together each on its own windows, as one key at a time would', async () => {
      const { limiter } = await start(NO_BANS);
      const keys = Array.from({ length: 40 }, newKeyId);
      const limits = { perMinute: 2, perDay: 5 };
      // Three requests per key, every key's in the same turn: one flush holds them all.
      const decisions = await Promise.all(
        keys.flatMap((keyId) => [1, 2, 3].map(() => limiter.consume(keyId, fixed(limits), 1))),
      );
      for (let k = 0; k < keys.length; k++) {
        const mine = decisions.slice(3 * k, 3 * k + 3);
        expect(mine.map((d) => d.outcome)).toEqual(['admitted', 'admitted', 'limited']);
        expect(mine.map((d) => window(d, 'day').remaining)).toEqual([4, 3, 3]);
      }
      for (const keyId of keys) {
        expect((await limiter.usage(keyId, fixed(limits))).windows.map((w) => w.used)).toEqual([2, 2]);
      }
    });

    it('counts a refusal toward a ban until its Retry-After, less the grace, has passed', async () => {
      const { limiter, advance, now } = await start({ ...BAN, graceMs: 500 });
      const keyId = newKeyId();
      const policy = fixed({ perMinute: 1, perDay: 100 });
      await limiter.consume(keyId, policy, 1);
      await advance(50_000);
      const refusedAt = now();
      const refused = await limiter.consume(keyId, policy, 1);
      if (refused.outcome !== 'limited') throw new Error(refused.outcome);
      expect(refused.retryAfterMs).toBeGreaterThan(9_000);
      expect(refused.retryAfterMs).toBeLessThan(11_000);
      expect((await limiter.usage(keyId, policy)).refusals).toBe(1);
      // It counts in steps of PENDING_BUCKET_MS on the clock, rounded down: until the step that
      // holds its end. Checked 90 ms before that step ends (a step early would be gone), not at
      // Retry-After less the grace less a step: that left from 0 to 100 ms, and a Redis TTL a
      // busy CI let run 1 ms past it went.
      const ends = Math.floor((refusedAt + refused.retryAfterMs - 500) / PENDING_BUCKET_MS) * PENDING_BUCKET_MS;
      await advance(ends - 90 - now());
      expect((await limiter.usage(keyId, policy)).refusals).toBe(1);
      await advance(90);
      expect((await limiter.usage(keyId, policy)).refusals).toBe(0);
    });

    it('bans on the refusal that makes more than the threshold count at once, however far apart they came', async () => {
      const { limiter, advance } = await start();
      const keyId = newKeyId();
      const policy = fixed({ perMinute: 1, perDay: 100 });
      await limiter.consume(keyId, policy, 1);
      const outcomes = [];
      // Each told to wait for the minute's end: all four still count when the fourth comes.
      for (let i = 0; i < BAN.threshold + 1; i++) {
        await advance(12_000);
        outcomes.push((await limiter.consume(keyId, policy, 1)).outcome);
      }
      expect(outcomes).toEqual([...Array(BAN.threshold).fill('limited'), 'banned']);
    });

    it('tells a refusal to wait at least the shortest Retry-After, counts it that long, and still admits when the window has room', async () => {
      const { limiter, now, advance } = await start({ ...BAN, minRetryAfterMs: 8_000 });
      const keyId = newKeyId();
      const policy = policyFor({ perSecond: 1, perMinute: 100 });
      await limiter.consume(keyId, policy, 1);
      const refused = await limiter.consume(keyId, policy, 1);
      if (refused.outcome !== 'limited') throw new Error(refused.outcome);
      expect(refused.retryAfterMs).toBe(8_000);
      // The window's own reset is still the second's.
      expect(window(refused, 'second').resetAt - now()).toBeLessThanOrEqual(1_000);
      await advance(1_000 + TTL_LAG);
      expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('admitted');
      await advance(6_800 - TTL_LAG);
      expect((await limiter.usage(keyId, policy)).refusals).toBe(1);
      await advance(200);
      expect((await limiter.usage(keyId, policy)).refusals).toBe(0);
    });

    it('counts a refusal for the window that refused it, not until another that it would have filled exactly resets', async () => {
      const { limiter, advance } = await start();
      const keyId = newKeyId();
      const policy = fixed({ perMinute: 1, perDay: 2 });
      await limiter.consume(keyId, policy, 1);
      await advance(50_000);
      // Refused by the minute; the day (1 of 2) would be exactly full: it plays no part.
      const refused = await limiter.consume(keyId, policy, 1);
      if (refused.outcome !== 'limited') throw new Error(refused.outcome);
      expect(refused.retryAfterMs).toBeLessThan(11_000);
      expect((await limiter.usage(keyId, policy)).refusals).toBe(1);
      // The minute's end: the refusal is forgotten with it, not kept until the day's (or the ban window's) end.
      await advance(refused.retryAfterMs);
      expect((await limiter.usage(keyId, policy)).refusals).toBe(0);
      await advance(MINUTE_ENDED - 60_000);
      expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('admitted');
      for (let i = 0; i < BAN.threshold; i++) expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('limited');
    });

    it(`counts every refusal of clients refused at once: ${DEFAULT_BAN.threshold} are no ban, one more is`, async () => {
      const { limiter } = await start(DEFAULT_BAN);
      const keyId = newKeyId();
      const policy = fixed({ perMinute: 10, perDay: 1_000 });
      const decisions = await Promise.all(
        Array.from({ length: 10 + DEFAULT_BAN.threshold }, () => limiter.consume(keyId, policy, 1)),
      );
      expect(decisions.filter((d) => d.outcome === 'admitted')).toHaveLength(10);
      expect(decisions.filter((d) => d.outcome === 'limited')).toHaveLength(DEFAULT_BAN.threshold);
      expect(await limiter.banEndsAt(keyId)).toBeNull();
      expect((await limiter.usage(keyId, policy)).refusals).toBe(DEFAULT_BAN.threshold);
      const one = await limiter.consume(keyId, policy, 1);
      if (one.outcome !== 'banned') throw new Error(one.outcome);
      expect(one.started).toEqual({ refusals: DEFAULT_BAN.threshold + 1 });
    });

    /** A limiter's decision as a client reads the gateway's answer to it. */
    const answerOf = (decision: Decision, at: number): TimedAnswer => {
      if (decision.outcome === 'admitted') return { status: 200 };
      if (decision.outcome === 'limited') {
        return { status: 429, code: 'rate_limit_exceeded', retryAfter: Math.ceil(decision.retryAfterMs / 1000) };
      }
      if (decision.outcome === 'exhausted') throw new Error('no credits in these fleets');
      return { status: 429, code: 'api_key_banned', retryAfter: Math.ceil((decision.banEndsAt - at) / 1000) };
    };
    const plans = {
      fixed: fixed({ perMinute: 60, perDay: 1_000 }),
      sliding: policyFor({ perMinute: 60, perDay: 1_000 }, 'sliding'),
    };
    const n = DEFAULT_BAN.threshold;
    const politeFleets: Array<[string, () => FleetClient[], number]> = [
      [
        '14 clients of one request each, 0.5 s apart, after the window filled',
        () => fleets.oneRequestEach(14, 500),
        60,
      ],
      ['15 pollers each every 5 s', () => fleets.pollers(15, 5_000), 0],
      ['20 workers starting 3 s apart, each every 200 ms', () => fleets.workers(20, 3_000, 200), 0],
      [
        `${n} clients of one request each, 100 ms apart, after the window filled`,
        () => fleets.oneRequestEach(n, 100),
        60,
      ],
      [`${n} pollers each every 2 s`, () => fleets.pollers(n, 2_000), 0],
      [`${n} workers starting 100 ms apart, each every 100 ms`, () => fleets.workers(n, 100, 100), 0],
    ];
    for (const [plan, policy] of Object.entries(plans)) {
      it.each(politeFleets)(
        `never bans a fleet that honours Retry-After (${plan}): %s`,
        async (_name, clients, fill) => {
          const { limiter, now, advance } = await start(DEFAULT_BAN);
          const keyId = newKeyId();
          for (let i = 0; i < fill; i++) await limiter.consume(keyId, policy, 1);
          // A client honouring Retry-After has at most one refusal counting at any moment.
          let most = 0;
          const send = async () => {
            const answer = answerOf(await limiter.consume(keyId, policy, 1), now());
            most = Math.max(most, (await limiter.usage(keyId, policy)).refusals);
            return answer;
          };
          const fleet = clients();
          const run = await runFleet(fleet, { now, advance }, send, 180_000);
          expect(run.bannedAt).toBeNull();
          expect(run.answers.filter((a) => a.status === 429).length).toBeGreaterThanOrEqual(14);
          expect(most).toBeGreaterThan(0);
          expect(most).toBeLessThanOrEqual(fleet.length);
        },
      );
    }

    it.each([
      ['fixed, filled at once', plans.fixed, 60, 0],
      ['sliding, filled one a second: room comes back every second', plans.sliding, 1, 1_000],
    ])(
      'bans a client sending every 100 ms into a full window within 15 s of its first 429 (%s)',
      async (_name, policy, each, every) => {
        const { limiter, now, advance } = await start(DEFAULT_BAN);
        const keyId = newKeyId();
        for (let i = 0; i < 60 / each; i++) {
          for (let k = 0; k < each; k++) await limiter.consume(keyId, policy, 1);
          await advance(every);
        }
        const send = async () => answerOf(await limiter.consume(keyId, policy, 1), now());
        const run = await runFleet(fleets.rude(100), { now, advance }, send, 60_000);
        const firstRefusal = run.answers.find((a) => a.status === 429)?.at ?? 0;
        expect(run.bannedAt).not.toBeNull();
        expect((run.bannedAt ?? 0) - firstRefusal).toBeLessThanOrEqual(15_000);
      },
    );

    it('cannot tell a client retrying every 100 ms from ten polite ones when a refusal waits only a second', async () => {
      // What the shortest Retry-After is for: without it, the same client as above goes unbanned.
      const { limiter, now, advance } = await start({ ...DEFAULT_BAN, minRetryAfterMs: 0 });
      const keyId = newKeyId();
      for (let i = 0; i < 60; i++) {
        await limiter.consume(keyId, plans.sliding, 1);
        await advance(1_000);
      }
      const send = async () => answerOf(await limiter.consume(keyId, plans.sliding, 1), now());
      const run = await runFleet(fleets.rude(100), { now, advance }, send, 60_000);
      expect(run.answers.filter((a) => a.status === 429).length).toBeGreaterThan(400);
      expect(run.bannedAt).toBeNull();
    });
  });
}
