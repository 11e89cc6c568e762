import { afterEach, describe, expect, it } from 'vitest';
import { type Billing, DEFAULT_BILLING } from '../../src/limits/billing-period.js';
import type { BanPolicy, Decision } from '../../src/limits/key-limiter.js';
import { type Algorithm, customerPolicyFor, type LimitPolicy, type Limits } from '../../src/limits/policy.js';
import type { LimiterHarness } from './limiter.contract.js';

/** Every refusal counts for its whole Retry-After, which is the windows' own wait. */
const BAN: BanPolicy = { threshold: 3, windowMs: 60_000, durationMs: 900_000, graceMs: 0, minRetryAfterMs: 0 };
const NO_BANS: BanPolicy = { ...BAN, threshold: 1_000_000 };

/** A key of a customer: the customer's windows (`shared`) and the key's own, in one policy. */
const policy = (
  shared: Limits,
  own?: Limits,
  algorithm: Algorithm = 'fixed',
  billing: Billing = DEFAULT_BILLING,
): LimitPolicy => customerPolicyFor(shared, own, algorithm, false, billing);

/** A window of a decision by its name in the RateLimit headers: `minute`, `customer-day`. */
function window(decision: Decision, label: string) {
  const [scope, name] = label.startsWith('customer-') ? ['customer', label.slice(9)] : ['key', label];
  const w = decision.windows.find((x) => x.name === name && x.scope === scope);
  if (!w) throw new Error(`no ${label} window`);
  return w;
}

const refusedBy = (decision: Decision) =>
  decision.outcome === 'limited' ? `${decision.refusedBy.scope}:${decision.refusedBy.name}` : decision.outcome;

let counter = 0;
const ids = () => {
  const n = `${process.pid}_${Date.now()}_${counter++}`;
  return { customer: `cus_contract_${n}`, keys: [0, 1, 2].map((k) => `key_contract_${n}_${k}`) };
};

const at = (iso: string) => Date.parse(iso);

/**
 * What a customer's windows are, on every limiter: one count for all its keys, decided with each
 * key's own windows in the one call, exactly, with costs and sliding windows; its day and month
 * in its billing calendar (local days of 23 and 25 hours, an anchor day); a ban stays the key's.
 */
export function customerWindowsContract(name: string, make: (ban: BanPolicy) => Promise<LimiterHarness>): void {
  describe(`${name} limiter contract: customers' shared windows`, () => {
    let harness: LimiterHarness | undefined;
    const start = async (ban = BAN) => {
      harness = await make(ban);
      return harness;
    };
    afterEach(async () => {
      await harness?.cleanup();
      harness = undefined;
    });

    it('counts every key of a customer against its windows together, each key’s own windows its own', async () => {
      const { limiter } = await start(NO_BANS);
      const { customer, keys } = ids();
      const [a, b] = keys as [string, string];
      const withOwn = policy({ perMinute: 5, perDay: 100 }, { perMinute: 3 });
      const shared = policy({ perMinute: 5, perDay: 100 });
      const outcomes: string[] = [];
      for (let i = 0; i < 4; i++) outcomes.push(refusedBy(await limiter.consume(a, withOwn, 1, customer)));
      // a: 3 by its own minute, then refused by it; b: the 2 the customer has left, then refused by the customer's.
      expect(outcomes).toEqual(['admitted', 'admitted', 'admitted', 'key:minute']);
      const first = await limiter.consume(b, shared, 1, customer);
      expect(first.windows.map((w) => [w.scope, w.name, w.remaining])).toEqual([
        ['customer', 'minute', 1],
        ['customer', 'day', 96],
      ]);
      expect(refusedBy(await limiter.consume(b, shared, 1, customer))).toBe('admitted');
      const refused = await limiter.consume(b, shared, 1, customer);
      expect(refusedBy(refused)).toBe('customer:minute');
      expect(window(refused, 'customer-minute').remaining).toBe(0);
      // The key's own window and the customer's side by side, shortest first, the key's first.
      const again = await limiter.consume(a, withOwn, 1, customer);
      expect(again.windows.map((w) => `${w.scope}:${w.name}`)).toEqual([
        'key:minute',
        'customer:minute',
        'customer:day',
      ]);
      expect((await limiter.customerUsage(customer, shared)).map((w) => [w.scope, w.name, w.used])).toEqual([
        ['customer', 'minute', 5],
        ['customer', 'day', 5],
      ]);
      // Another customer, and a key without one, count on their own.
      expect((await limiter.consume(a, shared, 1, `${customer}_other`)).outcome).toBe('admitted');
    });

    it('admits exactly the customer’s limit from 3 keys × 150 concurrent requests', async () => {
      const { limiter } = await start();
      const { customer, keys } = ids();
      const shared = policy({ perMinute: 300, perDay: 10_000 });
      const decisions = await Promise.all(
        keys.flatMap((key) => Array.from({ length: 150 }, () => limiter.consume(key, shared, 1, customer))),
      );
      expect(decisions.filter((d) => d.outcome === 'admitted')).toHaveLength(300);
      const [usage] = await limiter.customerUsage(customer, shared);
      expect(usage?.used).toBe(300);
    });

    it('takes a request’s cost from the key’s windows and the customer’s; one that does not fit takes nothing', async () => {
      const { limiter } = await start(NO_BANS);
      const { customer, keys } = ids();
      const [a, b] = keys as [string, string];
      const ownPolicy = policy({ perMinute: 10 }, { perMinute: 8, perDay: 9 });
      const shared = policy({ perMinute: 10 });
      expect(refusedBy(await limiter.consume(a, ownPolicy, 4, customer))).toBe('admitted');
      expect(refusedBy(await limiter.consume(a, ownPolicy, 4, customer))).toBe('admitted');
      // The customer has 2 left: 3 is refused by it and takes nothing, from the key's windows either.
      expect(refusedBy(await limiter.consume(b, shared, 3, customer))).toBe('customer:minute');
      // The key's own windows have 0 (minute) and 1 (day) left: 2 is refused by them, the day the
      // one it waits longest for.
      expect(refusedBy(await limiter.consume(a, ownPolicy, 2, customer))).toBe('key:day');
      const fits = await limiter.consume(b, shared, 2, customer);
      expect(fits.outcome).toBe('admitted');
      expect(window(fits, 'customer-minute').remaining).toBe(0);
      const usage = await limiter.usage(a, ownPolicy, customer);
      expect(usage.windows.map((w) => [w.scope, w.name, w.used])).toEqual([
        ['key', 'minute', 8],
        ['customer', 'minute', 10],
        ['key', 'day', 8],
      ]);
    });

    it('slides a customer’s window over all its keys: capacity comes back as the oldest bucket leaves', async () => {
      const { limiter, advance, now } = await start(NO_BANS);
      const { customer, keys } = ids();
      const [a, b] = keys as [string, string];
      const sliding = policy({ perMinute: 4 }, undefined, 'sliding');
      await advance(1_000 - (now() % 1_000));
      expect((await limiter.consume(a, sliding, 2, customer)).outcome).toBe('admitted');
      await advance(30_000);
      expect((await limiter.consume(b, sliding, 2, customer)).outcome).toBe('admitted');
      const refused = await limiter.consume(a, sliding, 1, customer);
      expect(refusedBy(refused)).toBe('customer:minute');
      if (refused.outcome !== 'limited') return;
      // The first bucket leaves one minute and one bucket after it began.
      expect(refused.roomInMs).toBe(61_000 - 30_000);
      await advance(refused.roomInMs);
      expect((await limiter.consume(b, sliding, 2, customer)).outcome).toBe('admitted');
      expect(refusedBy(await limiter.consume(a, sliding, 1, customer))).toBe('customer:minute');
    });

    it('keeps a ban on the key that earned it: its siblings are refused, not banned', async () => {
      const { limiter } = await start();
      const { customer, keys } = ids();
      const [a, b] = keys as [string, string];
      const shared = policy({ perMinute: 1 });
      expect((await limiter.consume(a, shared, 1, customer)).outcome).toBe('admitted');
      // Refusals by the customer's window count toward the key's ban like any refusal.
      for (let i = 0; i < BAN.threshold; i++)
        expect(refusedBy(await limiter.consume(a, shared, 1, customer))).toBe('customer:minute');
      expect((await limiter.consume(a, shared, 1, customer)).outcome).toBe('banned');
      expect(await limiter.banEndsAt(a, customer)).not.toBeNull();
      expect(refusedBy(await limiter.consume(b, shared, 1, customer))).toBe('customer:minute');
      expect(await limiter.banEndsAt(b, customer)).toBeNull();
      await limiter.liftBan(a, customer);
      expect(await limiter.banEndsAt(a, customer)).toBeNull();
    });

    it.each([
      // Europe/Paris: 2027-03-28 has 23 hours (clocks forward at 02:00), 2027-10-31 has 25.
      ['a 23-hour local day', at('2027-03-28T10:00:00Z'), at('2027-03-28T22:00:00Z'), 23 * 3_600],
      ['a 25-hour local day', at('2027-10-31T10:00:00Z'), at('2027-10-31T23:00:00Z'), 25 * 3_600],
    ])('counts a customer’s day from local midnight to local midnight: %s', async (_name, noon, midnight, seconds) => {
      const { limiter, advance, now } = await start(NO_BANS);
      const { customer, keys } = ids();
      const [a, b] = keys as [string, string];
      const paris = policy({ perDay: 3 }, { perDay: 2 }, 'fixed', { anchorDay: 1, timeZone: 'Europe/Paris' });
      await advance(noon - now());
      const first = await limiter.consume(a, paris, 1, customer);
      for (const label of ['day', 'customer-day']) {
        expect(window(first, label)).toMatchObject({ windowSeconds: seconds, resetAt: midnight });
      }
      await limiter.consume(b, paris, 2, customer);
      const refused = await limiter.consume(a, paris, 1, customer);
      expect(refusedBy(refused)).toBe('customer:day');
      if (refused.outcome === 'limited') expect(refused.roomInMs).toBe(midnight - now());
      // One millisecond before local midnight it is still the same day; at midnight a new one.
      await advance(midnight - 1 - now());
      expect(refusedBy(await limiter.consume(b, paris, 1, customer))).toBe('customer:day');
      await advance(1);
      const next = await limiter.consume(b, paris, 1, customer);
      expect(next.outcome).toBe('admitted');
      expect(window(next, 'customer-day').remaining).toBe(2);
    });

    it('runs a customer’s month from its anchor day at local midnight, however long the month', async () => {
      const { limiter, advance, now } = await start(NO_BANS);
      const { customer, keys } = ids();
      const [a] = keys as [string];
      const anchored = policy({ perMonth: 2 }, undefined, 'fixed', { anchorDay: 28, timeZone: 'America/New_York' });
      // 2027-02-27 23:59 in New York (EST, UTC−5): the period that began on 28 January.
      await advance(at('2027-02-28T04:59:00Z') - now());
      const first = await limiter.consume(a, anchored, 2, customer);
      expect(window(first, 'customer-month')).toMatchObject({
        windowSeconds: 31 * 86_400,
        resetAt: at('2027-02-28T05:00:00Z'),
        remaining: 0,
      });
      expect(refusedBy(await limiter.consume(a, anchored, 1, customer))).toBe('customer:month');
      await advance(60_000);
      // From 28 February to 28 March: 28 days, less the hour that daylight saving takes on 14 March.
      const next = await limiter.consume(a, anchored, 1, customer);
      expect(next.outcome).toBe('admitted');
      expect(window(next, 'customer-month')).toMatchObject({
        windowSeconds: 28 * 86_400 - 3_600,
        resetAt: at('2027-03-28T04:00:00Z'),
        remaining: 1,
      });
    });
  });
}
