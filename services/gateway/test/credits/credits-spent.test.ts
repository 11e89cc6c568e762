import { describe, expect, it } from 'vitest';
import { customerOwner } from '../../src/billing/credit-owner.js';
import { HOUR_MS } from '../../src/credits/credit-ledger.js';
import { creditsSpent } from '../../src/credits/credits-spent.js';
import { MemoryCreditLedger } from '../../src/credits/memory-credit-ledger.js';
import type { CustomerRecord } from '../../src/customers/customer-store.js';
import type { GatewayDeps } from '../../src/deps.js';
import { calendarFor } from '../../src/limits/calendar.js';
import { DEFAULT_PLANS } from '../../src/plans/plans.js';

/*
 * The credits a customer spent in a range, from its ledger's hourly spend entries and the open
 * hour: over more entries than one page holds, hours before and after the range left out.
 */

const customer: CustomerRecord = {
  id: 'cus_spent0000000000',
  name: 'Acme',
  plan: 'pro',
  billing: { anchorDay: 1, timeZone: 'UTC' },
  credits: {},
  createdAt: '2026-01-01T00:00:00.000Z',
};
const owner = customerOwner(DEFAULT_PLANS, customer);
const at = (text: string) => Date.parse(text);

/** A ledger with a spend of (i % 5) + 1 in each of `hours` UTC hours from `start`; the last hour still open. */
function spentHourly(start: number, hours: number) {
  const ledger = new MemoryCreditLedger();
  const spends: Array<[hour: number, amount: number]> = [];
  for (let i = 0; i < hours; i++) {
    const { held } = ledger.state(customer.id, undefined, start + i * HOUR_MS + 1);
    ledger.spend(held, (i % 5) + 1);
    spends.push([start + i * HOUR_MS, (i % 5) + 1]);
  }
  const announced: unknown[] = [];
  const deps = {
    credits: ledger,
    webhooks: { onCredits: (...args: unknown[]) => announced.push(args) },
    announced,
  } as unknown as Pick<GatewayDeps, 'credits' | 'webhooks'>;
  const sum = (from: number, to: number) =>
    spends.filter(([hour]) => hour >= from && hour < to).reduce((t, [, amount]) => t + amount, 0);
  return { deps, sum, last: start + (hours - 1) * HOUR_MS };
}

describe('creditsSpent', () => {
  it('sums the spend hours in the range over more than a page of entries, the open hour included', async () => {
    // 700 hours from 20 February: into the second half of March, more than a 500-entry page.
    const { deps, sum, last } = spentHourly(at('2026-02-20T00:00:00Z'), 700);
    const now = last + 60_000;
    const march = await creditsSpent(deps, owner, at('2026-03-01T00:00:00Z'), at('2026-04-01T00:00:00Z'), now);
    const february = await creditsSpent(deps, owner, at('2026-02-01T00:00:00Z'), at('2026-03-01T00:00:00Z'), now);
    expect(march).toBe(sum(at('2026-03-01T00:00:00Z'), at('2026-04-01T00:00:00Z')));
    expect(february).toBe(sum(at('2026-02-01T00:00:00Z'), at('2026-03-01T00:00:00Z')));
    expect(march + february).toBe(sum(0, Number.MAX_SAFE_INTEGER));
    // The open hour (the last) is in March's sum, not yet an entry.
    const lastHour = (699 % 5) + 1;
    expect(await creditsSpent(deps, owner, last, last + HOUR_MS, now)).toBe(lastHour);
    // A range ending where the open hour starts leaves it out.
    const before = (698 % 5) + 1;
    expect(await creditsSpent(deps, owner, last - HOUR_MS, last, now)).toBe(before);
  });

  it('closes a past hour still open into its entry, and counts it once', async () => {
    const { deps, last } = spentHourly(at('2026-03-31T22:00:00Z'), 2);
    // April: the last March hour (23:00) was still open; reading closes it.
    const now = at('2026-04-01T05:00:00Z');
    expect(await creditsSpent(deps, owner, at('2026-03-01T00:00:00Z'), at('2026-04-01T00:00:00Z'), now)).toBe(3);
    expect(await creditsSpent(deps, owner, at('2026-04-01T00:00:00Z'), now + HOUR_MS, now)).toBe(0);
    expect(await creditsSpent(deps, owner, last, last + HOUR_MS, now)).toBe(2);
  });

  it('announces the refill its read of the balance applied, as every reader does', async () => {
    const { deps, last } = spentHourly(at('2026-03-31T22:00:00Z'), 1);
    const refilling = customerOwner(DEFAULT_PLANS, { ...customer, credits: { refill: { amount: 50, every: 'day' } } });
    const now = last + 60_000;
    // The harness spent 1 from an empty balance (-1): the day's refill of 50 adds 51.
    expect(await creditsSpent(deps, refilling, last, last + HOUR_MS, now)).toBe(1);
    expect(await creditsSpent(deps, refilling, last, last + HOUR_MS, now)).toBe(1);
    const announced = (deps as unknown as { announced: unknown[] }).announced;
    expect(announced).toEqual([
      [refilling.ref, { before: 50, after: 50, refilled: 51 }, 50],
      [refilling.ref, { before: 50, after: 50, refilled: 0 }, 50],
    ]);
  });

  it('counts credits given back for unserved requests out of their hour, across a period boundary', async () => {
    const rule = { refill: null, calendar: calendarFor({ anchorDay: 1, timeZone: 'UTC' }) };
    const { deps } = spentHourly(at('2026-03-31T22:00:00Z'), 2);
    const ledger = deps.credits as MemoryCreditLedger;
    // 23:00 spent 2: 1 unserved, refunded while open (the spend is written net); the request
    // admitted at 23:59:59 and answered in April is refunded into March's hour (a refund entry).
    expect(await ledger.refund(owner.id, rule, at('2026-03-31T23:00:00Z'), 1, at('2026-03-31T23:30:00Z'))).toBe(1);
    expect(await ledger.refund(owner.id, rule, at('2026-03-31T23:00:00Z'), 1, at('2026-04-01T00:00:01Z'))).toBe(1);
    const now = at('2026-04-01T05:00:00Z');
    expect(await creditsSpent(deps, owner, at('2026-03-01T00:00:00Z'), at('2026-04-01T00:00:00Z'), now)).toBe(1);
    expect(await creditsSpent(deps, owner, at('2026-04-01T00:00:00Z'), now + HOUR_MS, now)).toBe(0);
    const { items } = await ledger.page(owner.id, { limit: 10 });
    expect(items.map((e) => [e.type, e.amount])).toEqual([
      ['refund', 1],
      ['spend', -1],
      ['spend', -1],
    ]);
  });
});
