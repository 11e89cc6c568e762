import { afterEach, describe, expect, it } from 'vitest';
import type { CreditLedger } from '../../src/credits/credit-ledger.js';
import type { CreditRule, CreditTerms } from '../../src/credits/credit-terms.js';
import { DEFAULT_BILLING } from '../../src/limits/billing-period.js';
import { calendarFor, UTC_CALENDAR } from '../../src/limits/calendar.js';
import type { BanPolicy, Decision } from '../../src/limits/key-limiter.js';
import { customerPolicyFor, type LimitPolicy, type Limits, policyFor, withCredits } from '../../src/limits/policy.js';
import type { LimiterHarness } from './limiter.contract.js';

/** A low threshold: a refusal that counted toward a ban would show within a few. */
const BAN: BanPolicy = { threshold: 3, windowMs: 60_000, durationMs: 900_000, graceMs: 0, minRetryAfterMs: 0 };

/** A key standing for itself, with credits on `terms`. */
const keyPolicy = (limits: Limits, terms: CreditTerms = {}): LimitPolicy =>
  withCredits(policyFor(limits), terms, UTC_CALENDAR);
/** A key of a customer, with the customer's credits on `terms`. */
const customerPolicy = (limits: Limits, terms: CreditTerms = {}): LimitPolicy =>
  withCredits(
    customerPolicyFor(limits, undefined, 'fixed', false, DEFAULT_BILLING),
    terms,
    calendarFor(DEFAULT_BILLING),
  );

const rule = (policy: LimitPolicy): CreditRule => policy.credits as CreditRule;

let counter = 0;
const unique = (what: string) => `${what}_credits_${process.pid}_${Date.now()}_${counter++}`;

async function topUp(ledger: CreditLedger, owner: string, policy: LimitPolicy, amount: number, now: number) {
  const change = { type: 'topup' as const, amount, reason: 'test', ref: unique('ref'), at: now };
  return ledger.add(owner, rule(policy), change, now);
}

const outcomes = (decisions: Decision[]) => decisions.map((d) => d.outcome);

/**
 * Credits on every limiter: the balance is spent in the limiter's call with the windows, a request
 * it cannot cover takes nothing from either and counts toward no ban, refills come once per period,
 * and the balance is the ledger's sum.
 */
export function creditsContract(name: string, make: (ban: BanPolicy) => Promise<LimiterHarness>): void {
  describe(`${name} limiter contract: credits`, () => {
    let harness: LimiterHarness | undefined;
    const start = async () => {
      harness = await make(BAN);
      return harness;
    };
    afterEach(async () => {
      await harness?.cleanup();
      harness = undefined;
    });

    it('spends each admitted request’s cost, decides mixed costs in order, and a request that does not fit takes nothing', async () => {
      const { limiter, credits, now } = await start();
      const keyId = unique('key');
      const policy = keyPolicy({ perMinute: 100, perDay: 1_000 });
      await topUp(credits, keyId, policy, 10, now());
      const decisions: Decision[] = [];
      for (const cost of [4, 5, 3, 1, 2]) decisions.push(await limiter.consume(keyId, policy, cost));
      // 4 + 5 fit (1 left), 3 does not, 1 does, 2 does not.
      expect(outcomes(decisions)).toEqual(['admitted', 'admitted', 'exhausted', 'admitted', 'exhausted']);
      expect(decisions[2]).toMatchObject({ outcome: 'exhausted', balance: 1, retryAfterMs: null });
      expect(decisions[4]).toMatchObject({ outcome: 'exhausted', balance: 0 });
      // The windows counted the admitted units only.
      const usage = await limiter.usage(keyId, policy);
      expect(usage.windows.map((w) => w.used)).toEqual([10, 10]);
      expect((await credits.balance(keyId, rule(policy), now())).balance).toBe(0);
    });

    it('never bans for refusals out of credits, and a window’s refusal still counts', async () => {
      const { limiter, credits, now } = await start();
      const keyId = unique('key');
      const policy = keyPolicy({ perMinute: 100 });
      await topUp(credits, keyId, policy, 1, now());
      expect((await limiter.consume(keyId, policy, 1)).outcome).toBe('admitted');
      const refused: Decision[] = [];
      for (let i = 0; i < 3 * BAN.threshold; i++) refused.push(await limiter.consume(keyId, policy, 1));
      expect(new Set(outcomes(refused))).toEqual(new Set(['exhausted']));
      const usage = await limiter.usage(keyId, policy);
      expect(usage).toMatchObject({ banEndsAt: null, refusals: 0 });
      // A request free of cost (a scope the key lacks) is never refused for credits.
      expect((await limiter.consume(keyId, policy, 0)).outcome).toBe('admitted');
    });

    it('marks the balance exhausted once, on the first call that cannot pay (its balance and the cost), again only after credits come back', async () => {
      const { limiter, credits, now } = await start();
      const keyId = unique('key');
      const policy = keyPolicy({ perMinute: 1_000 });
      const announced = (decisions: Decision[]) =>
        decisions.flatMap((d) => (d.credits?.exhausted ? [d.credits.exhausted] : []));
      const refusals = (n: number, cost: number) =>
        Promise.all(Array.from({ length: n }, () => limiter.consume(keyId, policy, cost)));
      await topUp(credits, keyId, policy, 1, now());
      // 1 left, each request costs 5: twenty concurrent refusals, one announcement among them.
      const first = await refusals(20, 5);
      expect(new Set(outcomes(first))).toEqual(new Set(['exhausted']));
      expect(announced(first)).toEqual([{ balance: 1, cost: 5 }]);
      expect(announced(await refusals(5, 5))).toEqual([]);
      // A top-up brings credits back, still short of 5: the next refusal announces again.
      await topUp(credits, keyId, policy, 2, now());
      expect(announced(await refusals(10, 5))).toEqual([{ balance: 3, cost: 5 }]);
      // Spending to 0 after that announces nothing more: the balance has said it cannot pay.
      expect(announced([await limiter.consume(keyId, policy, 3)])).toEqual([]);
      // A top-up, then spends down to 0: the spend that leaves 0 announces, the refusals after it do not.
      await topUp(credits, keyId, policy, 2, now());
      const spent = await refusals(4, 1);
      expect(outcomes(spent).filter((o) => o === 'admitted')).toHaveLength(2);
      expect(announced(spent)).toEqual([{ balance: 0 }]);
      // An adjustment down to 0 announces too (the ledger's change, not the limiter's call).
      await topUp(credits, keyId, policy, 4, now());
      const down = { type: 'adjustment' as const, amount: -4, reason: 'test', ref: unique('ref'), at: now() };
      expect(await credits.add(keyId, rule(policy), down, now())).toMatchObject({ outcome: 'added', exhausted: true });
      expect(announced(await refusals(3, 1))).toEqual([]);
    });

    it('clears the exhausted mark with a refill that raises the balance, not with a refund of unserved requests', async () => {
      const { limiter, credits, now, advance } = await start();
      const keyId = unique('key');
      const policy = keyPolicy({ perMinute: 1_000 }, { refill: { amount: 3, every: 'day' } });
      const spent = await Promise.all([0, 1, 2].map(() => limiter.consume(keyId, policy, 1)));
      expect(spent.flatMap((d) => (d.credits?.exhausted ? [d.credits.exhausted] : []))).toEqual([{ balance: 0 }]);
      // A refund gives back what an unserved request took: the balance has said it cannot pay, and stays so.
      const hour = now() - (now() % 3_600_000);
      expect(await credits.refund(keyId, rule(policy), hour, 1, now())).toBe(1);
      expect((await limiter.consume(keyId, policy, 1)).credits?.exhausted).toBeUndefined();
      expect((await limiter.consume(keyId, policy, 1)).credits?.exhausted).toBeUndefined();
      // The next day's refill brings it back to 3: a request of 5 is the first it cannot pay.
      await advance(UTC_CALENDAR.end('day', now()) - now());
      const refused = await limiter.consume(keyId, policy, 5);
      expect(refused).toMatchObject({
        outcome: 'exhausted',
        credits: { refilled: 3, exhausted: { balance: 3, cost: 5 } },
      });
    });

    it('shares a customer’s balance among its keys, beside its windows', async () => {
      const { limiter, credits, now } = await start();
      const customer = unique('cus');
      const [a, b] = [unique('key'), unique('key')];
      const policy = customerPolicy({ perMinute: 100 });
      await topUp(credits, customer, policy, 5, now());
      const decisions: Decision[] = [];
      for (const key of [a, b, a, b, a, b]) decisions.push(await limiter.consume(key, policy, 1, customer));
      expect(outcomes(decisions)).toEqual(['admitted', 'admitted', 'admitted', 'admitted', 'admitted', 'exhausted']);
      const [minute] = await limiter.customerUsage(customer, policy);
      expect(minute?.used).toBe(5);
    });

    it('refills up to the amount once a day, saying when in a refusal, and keeps what was topped up above it', async () => {
      const { limiter, credits, now, advance } = await start();
      const keyId = unique('key');
      const policy = keyPolicy({ perMinute: 100 }, { refill: { amount: 3, every: 'day' } });
      const first = await Promise.all([0, 1, 2, 3].map(() => limiter.consume(keyId, policy, 1)));
      expect(outcomes(first).filter((o) => o === 'admitted')).toHaveLength(3);
      const refused = first.find((d) => d.outcome === 'exhausted');
      const tomorrow = UTC_CALENDAR.end('day', now());
      expect(refused).toMatchObject({ retryAfterMs: tomorrow - now() });
      // A request dearer than the refill is told no refill covers it.
      expect(await limiter.consume(keyId, policy, 4)).toMatchObject({ outcome: 'exhausted', retryAfterMs: null });
      await advance(tomorrow - now());
      await topUp(credits, keyId, policy, 10, now());
      expect((await credits.balance(keyId, rule(policy), now())).balance).toBe(13);
      await advance(24 * 3_600_000);
      // Not refilled: 13 is above the amount.
      expect((await credits.balance(keyId, rule(policy), now())).balance).toBe(13);
      const refills = (await credits.page(keyId, { limit: 50 })).items.filter((e) => e.type === 'refill');
      expect(refills.map((e) => e.amount)).toEqual([3, 3]);
    });

    it('keeps the balance the ledger’s sum: grants, spends closed by the hour, the open hour', async () => {
      const { limiter, credits, now, advance } = await start();
      const customer = unique('cus');
      const policy = customerPolicy({ perMinute: 1_000 }, { refill: { amount: 20, every: 'period' } });
      const key = unique('key');
      await topUp(credits, customer, policy, 30, now());
      await Promise.all(Array.from({ length: 25 }, () => limiter.consume(key, policy, 1, customer)));
      await advance(3_600_000);
      await Promise.all(Array.from({ length: 40 }, () => limiter.consume(key, policy, 2, customer)));
      const { balance, openHour } = await credits.balance(customer, rule(policy), now());
      const entries = (await credits.page(customer, { limit: 500 })).items;
      const sum = entries.reduce((total, e) => total + e.amount, 0) - (openHour?.spent ?? 0);
      expect(balance).toBe(sum);
      // 20 refilled + 30 topped up = 50: 25 the first hour, then 12 of cost 2 (1 left).
      expect(balance).toBe(1);
      expect(entries.filter((e) => e.type === 'spend').map((e) => e.amount)).toEqual([-25]);
      expect(openHour?.spent).toBe(24);
    });

    it('gives back unserved requests’ credits once, never more than was spent: the open hour net, the hour just closed by a refund entry', async () => {
      const { limiter, credits, now, advance } = await start();
      const customer = unique('cus');
      const policy = customerPolicy({ perMinute: 1_000 });
      const key = unique('key');
      await topUp(credits, customer, policy, 10, now());
      await Promise.all(Array.from({ length: 6 }, () => limiter.consume(key, policy, 1, customer)));
      const hour = now() - (now() % 3_600_000);
      expect(await credits.refund(customer, rule(policy), hour, 2, now())).toBe(2);
      // Twelve more refunds of 1 race for the 4 still spent in the hour: 4 come back, no more.
      const raced = await Promise.all(
        Array.from({ length: 12 }, () => credits.refund(customer, rule(policy), hour, 1, now())),
      );
      expect(raced.reduce((a, b) => a + b, 0)).toBe(4);
      expect(await credits.balance(customer, rule(policy), now())).toMatchObject({ balance: 10, openHour: null });
      await Promise.all(Array.from({ length: 3 }, () => limiter.consume(key, policy, 1, customer)));
      // The hour closes with its spend net of its refunds (3); a late refund for it is an entry of its own.
      await advance(hour + 3_600_000 - now());
      expect(await credits.refund(customer, rule(policy), hour, 5, now())).toBe(3);
      expect(await credits.refund(customer, rule(policy), hour, 1, now())).toBe(0);
      const entries = (await credits.page(customer, { limit: 50 })).items;
      expect(entries.map((e) => [e.type, e.amount, e.at])).toEqual([
        ['refund', 3, hour],
        ['spend', -3, hour],
        ['topup', 10, expect.any(Number)],
      ]);
      const { balance, openHour } = await credits.balance(customer, rule(policy), now());
      expect(balance).toBe(10);
      expect(balance).toBe(entries.reduce((total, e) => total + e.amount, 0) - (openHour?.spent ?? 0));
      // Once a later hour has closed with a spend, an earlier one gets nothing more: its entries are final.
      await Promise.all(Array.from({ length: 2 }, () => limiter.consume(key, policy, 1, customer)));
      await advance(2 * 3_600_000);
      expect(await credits.refund(customer, rule(policy), hour, 2, now())).toBe(0);
      expect((await credits.balance(customer, rule(policy), now())).balance).toBe(8);
    });
  });
}
