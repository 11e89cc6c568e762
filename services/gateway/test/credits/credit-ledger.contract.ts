import { afterEach, describe, expect, it } from 'vitest';
import type { CreditChange, CreditLedger } from '../../src/credits/credit-ledger.js';
import type { CreditRule } from '../../src/credits/credit-terms.js';
import { calendarFor, UTC_CALENDAR } from '../../src/limits/calendar.js';
import { BadCursorError } from '../../src/paging/page.js';

export interface LedgerHarness {
  ledger: CreditLedger;
  cleanup(): Promise<void>;
}

const NO_REFILL: CreditRule = { refill: null, calendar: UTC_CALENDAR };
/** A billing period from the 15th in Paris: 2026-11-14T23:00Z to 2026-12-14T23:00Z. */
const MONTHLY: CreditRule = {
  refill: { amount: 500, every: 'period' },
  calendar: calendarFor({ anchorDay: 15, timeZone: 'Europe/Paris' }),
};

let counter = 0;
const owner = () => `cus_ledger_${process.pid}_${Date.now()}_${counter++}`;
const at = (iso: string) => Date.parse(iso);
const change = (amount: number, ref: string, type: CreditChange['type'] = 'topup'): CreditChange => ({
  type,
  amount,
  reason: `because ${ref}`,
  ref,
  at: at('2026-11-20T10:00:00Z'),
});

/** What every credit ledger does alike (docs/credits.md). */
export function creditLedgerContract(name: string, make: () => Promise<LedgerHarness>): void {
  describe(`${name} credit ledger contract`, () => {
    let harness: LedgerHarness | undefined;
    const start = async () => {
      harness = await make();
      return harness.ledger;
    };
    afterEach(async () => {
      await harness?.cleanup();
      harness = undefined;
    });

    it('adds a change once per reference, however often and however concurrently it is sent', async () => {
      const ledger = await start();
      const id = owner();
      const now = at('2026-11-20T10:00:00Z');
      const results = await Promise.all(
        Array.from({ length: 10 }, () => ledger.add(id, NO_REFILL, change(50, 'a'), now)),
      );
      expect(results.filter((r) => r.outcome === 'added')).toHaveLength(1);
      expect(new Set(results.map((r) => (r.outcome === 'short' ? '' : r.entryId))).size).toBe(1);
      expect(await ledger.add(id, NO_REFILL, change(50, 'a'), now)).toMatchObject({ outcome: 'held', balance: 50 });
      expect(await ledger.add(id, NO_REFILL, change(7, 'b', 'grant'), now)).toMatchObject({
        outcome: 'added',
        balance: 57,
      });
      expect((await ledger.balance(id, NO_REFILL, now)).balance).toBe(57);
      const { items } = await ledger.page(id, { limit: 10 });
      expect(items.map(({ type, amount, reason, ref }) => ({ type, amount, reason, ref }))).toEqual([
        { type: 'grant', amount: 7, reason: 'because b', ref: 'b' },
        { type: 'topup', amount: 50, reason: 'because a', ref: 'a' },
      ]);
    });

    it('refuses an adjustment that would take the balance below zero, changing nothing', async () => {
      const ledger = await start();
      const id = owner();
      const now = at('2026-11-20T10:00:00Z');
      await ledger.add(id, NO_REFILL, change(10, 'a'), now);
      expect(await ledger.add(id, NO_REFILL, change(-11, 'b', 'adjustment'), now)).toEqual({
        outcome: 'short',
        balance: 10,
        refilled: 0,
      });
      expect(await ledger.add(id, NO_REFILL, change(-10, 'c', 'adjustment'), now)).toMatchObject({ balance: 0 });
      expect((await ledger.page(id, { limit: 10 })).items.map((e) => e.amount)).toEqual([-10, 10]);
    });

    it('refills up to the amount once per billing period, from the anchor day in its zone', async () => {
      const ledger = await start();
      const id = owner();
      const first = await ledger.balance(id, MONTHLY, at('2026-11-20T10:00:00Z'));
      expect(first).toMatchObject({ balance: 500, refilled: 500 });
      expect(await ledger.balance(id, MONTHLY, at('2026-12-14T22:59:59Z'))).toMatchObject({
        balance: 500,
        refilled: 0,
      });
      await ledger.add(id, MONTHLY, change(-200, 'spent', 'adjustment'), at('2026-12-14T22:59:59Z'));
      // The 15th at 00:00 in Paris: a new period.
      expect(await ledger.balance(id, MONTHLY, at('2026-12-14T23:00:00Z'))).toMatchObject({
        balance: 500,
        refilled: 200,
      });
      const refills = (await ledger.page(id, { limit: 10 })).items.filter((e) => e.type === 'refill');
      expect(refills.map((e) => [e.amount, e.period])).toEqual([
        [200, `period:${at('2026-12-14T23:00:00Z')}`],
        [500, `period:${at('2026-11-14T23:00:00Z')}`],
      ]);
    });

    it('gives nothing back for an hour in which nothing was spent: a refund creates no credit', async () => {
      const ledger = await start();
      const id = owner();
      const now = at('2026-11-20T10:30:00Z');
      await ledger.add(id, NO_REFILL, change(50, 'a'), now);
      expect(await ledger.refund(id, NO_REFILL, at('2026-11-20T10:00:00Z'), 5, now)).toBe(0);
      expect(await ledger.refund(id, NO_REFILL, at('2026-11-20T09:00:00Z'), 5, now)).toBe(0);
      expect(await ledger.refund(owner(), NO_REFILL, at('2026-11-20T10:00:00Z'), 5, now)).toBe(0);
      expect(await ledger.balance(id, NO_REFILL, now)).toMatchObject({ balance: 50, openHour: null });
      expect((await ledger.page(id, { limit: 10 })).items.map((e) => e.type)).toEqual(['topup']);
    });

    it('pages newest first behind the cursor it gives, and refuses one it did not', async () => {
      const ledger = await start();
      const id = owner();
      const now = at('2026-11-20T10:00:00Z');
      for (let i = 1; i <= 5; i++) await ledger.add(id, NO_REFILL, change(i, `r${i}`), now);
      const first = await ledger.page(id, { limit: 2 });
      expect(first.items.map((e) => e.amount)).toEqual([5, 4]);
      const second = await ledger.page(id, { limit: 2, after: first.next as string });
      expect(second.items.map((e) => e.amount)).toEqual([3, 2]);
      const last = await ledger.page(id, { limit: 2, after: second.next as string });
      expect(last).toMatchObject({ next: null });
      expect(last.items.map((e) => e.amount)).toEqual([1]);
      await expect(ledger.page(id, { limit: 2, after: 'nonsense' })).rejects.toThrow(BadCursorError);
      expect(await ledger.page(owner(), { limit: 2 })).toEqual({ items: [], next: null });
    });
  });
}
