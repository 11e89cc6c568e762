import { afterEach, describe, expect, it } from 'vitest';
import { type CreditChange, type CreditEntry, type CreditLedger, ENTRY_ID } from '../../src/credits/credit-ledger.js';
import { type CreditRule, MAX_CREDITS } from '../../src/credits/credit-terms.js';
import { calendarFor, UTC_CALENDAR } from '../../src/limits/calendar.js';
import { BadCursorError } from '../../src/paging/page.js';

export interface LedgerHarness {
  ledger: CreditLedger;
  /**
   * Spends `units` from the balance as the backend's limiter does (the Redis limit script, the
   * memory limiter's step), at `now`; false when the balance could not cover them.
   */
  spend(owner: string, units: number, now: number): Promise<boolean>;
  cleanup(): Promise<void>;
}

/** The retention the trim tests' ledgers are made with: short enough to pass on a clock. */
const RETENTION_MS = 10 * 86_400_000;
/** The others': longer than any range of dates they use. */
const LONG_RETENTION_MS = 400 * 86_400_000;
const HOUR = 3_600_000;

/** Every entry, newest first, by walking the pages (`limit` a page). */
async function allEntries(ledger: CreditLedger, id: string, limit = 500): Promise<CreditEntry[]> {
  const entries: CreditEntry[] = [];
  let after: string | undefined;
  do {
    const page = await ledger.page(id, { limit, ...(after !== undefined ? { after } : {}) });
    entries.push(...page.items);
    after = page.next ?? undefined;
  } while (after !== undefined);
  return entries;
}

/** The balance the ledger's entries say: their sum less the open hour's spend. */
async function ledgerSum(ledger: CreditLedger, id: string, now: number): Promise<{ balance: number; sum: number }> {
  const { balance, openHour } = await ledger.balance(id, NO_REFILL, now);
  const entries = await allEntries(ledger, id);
  return { balance, sum: entries.reduce((t, e) => t + e.amount, 0) - (openHour?.spent ?? 0) };
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
export function creditLedgerContract(name: string, make: (retentionMs: number) => Promise<LedgerHarness>): void {
  describe(`${name} credit ledger contract`, () => {
    let harness: LedgerHarness | undefined;
    const start = async (retentionMs = LONG_RETENTION_MS) => {
      harness = await make(retentionMs);
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

    // What a change says to the credit events (credits.low, credits.exhausted): the balance after
    // its last raise, and whether it is the change that took the balance to 0.
    it('answers each change with the balance after its last raise, and marks the one that took it to 0', async () => {
      const ledger = await start();
      const id = owner();
      const now = at('2026-11-20T10:00:00Z');
      const made = async (amount: number, ref: string, type: CreditChange['type'] = 'topup') => {
        const result = await ledger.add(id, NO_REFILL, change(amount, ref, type), now);
        expect(result.outcome === 'short' ? '' : result.entryId).toMatch(/^\d+-\d+$/);
        const { entryId: _, ...rest } = result as { entryId?: string };
        return rest;
      };
      expect(await made(10, 'a')).toEqual({ outcome: 'added', balance: 10, refilled: 0, raisedTo: 10 });
      expect(await made(-4, 'b', 'adjustment')).toEqual({ outcome: 'added', balance: 6, refilled: 0, raisedTo: 10 });
      // A change of nothing raises nothing (the admin API refuses it; the ledger still takes it).
      expect(await made(0, 'c', 'grant')).toEqual({ outcome: 'added', balance: 6, refilled: 0, raisedTo: 10 });
      expect(await made(-6, 'd', 'adjustment')).toEqual({
        outcome: 'added',
        balance: 0,
        refilled: 0,
        exhausted: true,
        raisedTo: 10,
      });
      expect(await made(3, 'e', 'grant')).toEqual({ outcome: 'added', balance: 3, refilled: 0, raisedTo: 3 });
      expect(await made(-3, 'f', 'adjustment')).toMatchObject({ balance: 0, exhausted: true });
      // Spent to 0 by the limiter, which marked it: a later change announces nothing more.
      await made(2, 'g');
      expect(await harness?.spend(id, 2, now)).toBe(true);
      expect(await made(0, 'h', 'grant')).toEqual({ outcome: 'added', balance: 0, refilled: 0, raisedTo: 2 });
      // A balance raised only by refills has no raise to measure against.
      const refilledOnly = owner();
      const down = await ledger.add(refilledOnly, MONTHLY, change(-100, 'down', 'adjustment'), now);
      expect(down).toEqual({ outcome: 'added', entryId: expect.any(String), balance: 400, refilled: 500 });
    });

    it('takes the largest change exactly, and as many of them as given', async () => {
      const ledger = await start();
      const id = owner();
      const now = at('2026-11-20T10:00:00Z');
      await ledger.add(id, NO_REFILL, change(MAX_CREDITS, 'a'), now);
      await ledger.add(id, NO_REFILL, change(MAX_CREDITS, 'b', 'grant'), now);
      expect(await ledger.add(id, NO_REFILL, change(-1, 'c', 'adjustment'), now)).toMatchObject({
        balance: 2 * MAX_CREDITS - 1,
      });
      expect(await ledger.add(id, NO_REFILL, change(-2 * MAX_CREDITS, 'd', 'adjustment'), now)).toMatchObject({
        outcome: 'short',
        balance: 2 * MAX_CREDITS - 1,
      });
      expect((await ledger.page(id, { limit: 10 })).items.map((e) => e.amount)).toEqual([-1, MAX_CREDITS, MAX_CREDITS]);
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
      // A period that starts with the balance at the amount exactly refills nothing: no entry of 0.
      expect(await ledger.balance(id, MONTHLY, at('2027-01-14T23:00:00Z'))).toMatchObject({
        balance: 500,
        refilled: 0,
      });
      const refills = (await ledger.page(id, { limit: 10 })).items.filter((e) => e.type === 'refill');
      expect(refills.map((e) => [e.amount, e.period])).toEqual([
        [200, `period:${at('2026-12-14T23:00:00Z')}`],
        [500, `period:${at('2026-11-14T23:00:00Z')}`],
      ]);
      // Each entry carries its own fields only: a refill no reason, no ref, no end.
      expect(refills[0]).toStrictEqual({
        id: expect.stringMatching(ENTRY_ID),
        type: 'refill',
        amount: 200,
        at: at('2026-12-14T23:00:00Z'),
        period: `period:${at('2026-12-14T23:00:00Z')}`,
      });
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

    it('gives a refund made under a reference back once, however often it is replayed', async () => {
      const ledger = await start();
      const id = owner();
      // Redis keeps the reference's mark until a time on its own clock: the test's is now.
      const now = Date.now();
      const hour = now - (now % 3_600_000);
      await ledger.add(id, NO_REFILL, change(20, 'stock'), now);
      expect(await harness?.spend(id, 5, now)).toBe(true);
      const once = { ref: 'spooled-1', keepUntil: now + 60_000 };
      expect(await ledger.refund(id, NO_REFILL, hour, 3, now, once)).toBe(3);
      expect(await ledger.refund(id, NO_REFILL, hour, 3, now, once)).toBe(0);
      expect(await ledger.refund(id, NO_REFILL, hour, 3, now, { ref: 'spooled-2', keepUntil: now + 60_000 })).toBe(2);
      expect(await ledger.balance(id, NO_REFILL, now)).toMatchObject({ balance: 20 });
    });

    // What a refund is: credits given back once for an hour's unserved requests, never more than
    // the hour spent; in the open hour its spend lowered, in the hour just closed a `refund` entry.
    it('gives a late refund once, as a refund entry of its hour, not a spend, from the first millisecond after it', async () => {
      const ledger = await start();
      const id = owner();
      const hour = at('2026-11-20T10:00:00Z');
      await ledger.add(id, NO_REFILL, change(10, 'a'), hour);
      expect(await harness?.spend(id, 6, hour + 600_000)).toBe(true);
      // The hour still open: its spend is lowered, no entry written.
      expect(await ledger.refund(id, NO_REFILL, hour, 2, hour + 1_200_000)).toBe(2);
      expect(await ledger.balance(id, NO_REFILL, hour + 1_200_000)).toMatchObject({
        balance: 6,
        openHour: { start: hour, spent: 4 },
      });
      const closed = hour + HOUR;
      // The hour closed at its end, net of the refund: a late refund of 3 of its 4 comes back as an entry.
      expect(await ledger.refund(id, NO_REFILL, hour, 3, closed)).toBe(3);
      expect(await ledger.balance(id, NO_REFILL, closed)).toMatchObject({ balance: 9, openHour: null });
      // Asked again, it gives back only the 1 still spent, then nothing.
      expect(await ledger.refund(id, NO_REFILL, hour, 3, closed + 1)).toBe(1);
      expect(await ledger.refund(id, NO_REFILL, hour, 3, closed + 2)).toBe(0);
      const entries = (await ledger.page(id, { limit: 10 })).items;
      expect(entries.map(({ type, amount, at: start, end }) => ({ type, amount, at: start, end }))).toEqual([
        { type: 'refund', amount: 1, at: hour, end: closed },
        { type: 'refund', amount: 3, at: hour, end: closed },
        { type: 'spend', amount: -4, at: hour, end: closed },
        { type: 'topup', amount: 10, at: hour, end: undefined },
      ]);
      expect(await ledgerSum(ledger, id, closed + 3)).toEqual({ balance: 10, sum: 10 });
      // A refund of the hour before the one last closed, or of an hour older still, gives nothing.
      expect(await ledger.refund(id, NO_REFILL, hour - HOUR, 1, closed + 3)).toBe(0);
      expect(await harness?.spend(id, 2, closed + 60_000)).toBe(true);
      expect(await ledger.refund(id, NO_REFILL, hour, 1, closed + 2 * HOUR)).toBe(0);
      expect(await ledger.refund(id, NO_REFILL, closed, 5, closed + 2 * HOUR)).toBe(2);
      expect((await ledger.page(id, { limit: 1 })).items).toMatchObject([{ type: 'refund', amount: 2, at: closed }]);
      expect(await ledgerSum(ledger, id, closed + 2 * HOUR)).toEqual({ balance: 10, sum: 10 });
    });

    // The spool replays a late refund under its reference: the hour's spend entry is written, so
    // the refund is an entry of its own, and a replay must add neither credits nor a second entry.
    it('gives a late refund replayed under its reference once: one refund entry, the balance up once', async () => {
      const ledger = await start();
      const id = owner();
      const hour = at('2026-11-20T10:00:00Z');
      const closed = hour + HOUR;
      await ledger.add(id, NO_REFILL, change(10, 'a'), hour);
      expect(await harness?.spend(id, 7, closed - 1)).toBe(true);
      // Redis keeps the mark until a time on its own clock: a keepUntil ahead of the real one.
      const once = { ref: 'late-1', keepUntil: Date.now() + 60_000 };
      expect(await ledger.refund(id, NO_REFILL, hour, 4, closed, once)).toBe(4);
      expect(await ledger.refund(id, NO_REFILL, hour, 4, closed + 1, once)).toBe(0);
      expect(await ledger.balance(id, NO_REFILL, closed + 1)).toMatchObject({ balance: 7, openHour: null });
      const entries = (await ledger.page(id, { limit: 10 })).items;
      expect(entries.map(({ type, amount, at: start, end }) => ({ type, amount, at: start, end }))).toEqual([
        { type: 'refund', amount: 4, at: hour, end: closed },
        { type: 'spend', amount: -7, at: hour, end: closed },
        { type: 'topup', amount: 10, at: hour, end: undefined },
      ]);
      // Another reference may still give back what the hour holds as spent, and no more.
      expect(await ledger.refund(id, NO_REFILL, hour, 4, closed + 2, { ...once, ref: 'late-2' })).toBe(3);
      expect(await ledgerSum(ledger, id, closed + 2)).toEqual({ balance: 10, sum: 10 });
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
      // A last page as full as asked still says it is the last.
      const full = await ledger.page(id, { limit: 3, after: first.next as string });
      expect(full.items.map((e) => e.amount)).toEqual([3, 2, 1]);
      expect(full.next).toBeNull();
      expect((await ledger.page(id, { limit: 5 })).next).toBeNull();
      await expect(ledger.page(id, { limit: 2, after: 'nonsense' })).rejects.toThrow(BadCursorError);
      expect(await ledger.page(owner(), { limit: 2 })).toEqual({ items: [], next: null });
    });

    // Entries are aged by their ids (the Redis clock, or the memory ledger's `now`): written at
    // about real time, then read on a clock past the retention.
    it('trims entries older than the retention behind one opening entry, last in the ledger, which still sums to the balance', async () => {
      const ledger = await start(RETENTION_MS);
      const id = owner();
      const t0 = Date.now();
      for (let i = 1; i <= 5; i++) await ledger.add(id, NO_REFILL, change(i, `r${i}`), t0);
      expect((await ledger.page(id, { limit: 10 })).items.map((e) => e.type)).toEqual(Array(5).fill('topup'));

      const t1 = t0 + RETENTION_MS + 3_600_000;
      expect(await ledger.balance(id, NO_REFILL, t1)).toMatchObject({ balance: 15 });
      const [opening] = (await ledger.page(id, { limit: 10 })).items;
      expect((await ledger.page(id, { limit: 10 })).items).toHaveLength(1);
      expect(opening).toMatchObject({ type: 'opening', amount: 15 });
      expect((opening as CreditEntry).at).toBeLessThan(t1 - RETENTION_MS);

      await ledger.add(id, NO_REFILL, change(7, 'r6'), t1);
      const first = await ledger.page(id, { limit: 1 });
      expect(first.items.map((e) => [e.type, e.amount])).toEqual([['topup', 7]]);
      const second = await ledger.page(id, { limit: 1, after: first.next as string });
      expect(second).toEqual({ items: [opening], next: null });
      expect(await ledger.page(id, { limit: 5, after: (opening as CreditEntry).id })).toEqual({
        items: [],
        next: null,
      });
      expect(await ledgerSum(ledger, id, t1)).toEqual({ balance: 22, sum: 22 });

      // A later trim carries the first opening and the newer entry into one (in Redis the read
      // just above may already have: the newer entry's id is the Redis clock's, behind `t1`).
      const t2 = t1 + RETENTION_MS + 3_600_000;
      await ledger.balance(id, NO_REFILL, t2);
      expect((await ledger.page(id, { limit: 10 })).items).toEqual([
        expect.objectContaining({ type: 'opening', amount: 22, id: first.items[0]?.id }),
      ]);
    });

    it('keeps an entry written exactly the retention ago, and trims it the millisecond after', async () => {
      const ledger = await start(RETENTION_MS);
      const id = owner();
      await ledger.add(id, NO_REFILL, change(4, 'edge'), Date.now());
      const [entry] = (await ledger.page(id, { limit: 1 })).items;
      // Its id's millisecond is when it was written (the Redis clock's, or the memory ledger's now).
      const written = Number((entry as CreditEntry).id.split('-')[0]);
      await ledger.balance(id, NO_REFILL, written + RETENTION_MS);
      expect((await ledger.page(id, { limit: 5 })).items).toEqual([entry]);
      await ledger.balance(id, NO_REFILL, written + RETENTION_MS + 1);
      expect((await ledger.page(id, { limit: 5 })).items).toEqual([
        { id: (entry as CreditEntry).id, type: 'opening', amount: 4, at: written },
      ]);
      // The trimmed entry's reference goes with it: only ever retried within a day, it may be used again.
      expect(await ledger.add(id, NO_REFILL, change(4, 'edge'), written + RETENTION_MS + 1)).toMatchObject({
        outcome: 'added',
        balance: 8,
      });
    });

    it('trims at most a thousand entries a call: a long-unread ledger over a few', async () => {
      const ledger = await start(RETENTION_MS);
      const id = owner();
      const t0 = Date.now();
      await Promise.all(Array.from({ length: 1002 }, (_, i) => ledger.add(id, NO_REFILL, change(1, `r${i}`), t0)));
      const later = t0 + RETENTION_MS + HOUR;
      expect((await ledger.balance(id, NO_REFILL, later)).balance).toBe(1002);
      expect((await ledger.page(id, { limit: 5 })).items.map((e) => [e.type, e.amount])).toEqual([
        ['topup', 1],
        ['topup', 1],
        ['opening', 1000],
      ]);
      await ledger.balance(id, NO_REFILL, later);
      expect((await ledger.page(id, { limit: 5 })).items.map((e) => [e.type, e.amount])).toEqual([['opening', 1002]]);
    });

    it('keeps the balance the ledger’s sum when trims run among concurrent spends', async () => {
      const ledger = await start(RETENTION_MS);
      const id = owner();
      const t0 = Date.now();
      await ledger.add(id, NO_REFILL, change(1000, 'stock'), t0);
      // Spends in three past hours, closed into spend entries by the reads after them.
      for (let h = 0; h < 3; h++) {
        await harness?.spend(id, 10, t0 + h * 3_600_000);
        await ledger.balance(id, NO_REFILL, t0 + (h + 1) * 3_600_000);
      }
      const later = t0 + RETENTION_MS + 5 * 3_600_000;
      const runs = await Promise.all([
        ...Array.from({ length: 300 }, (_, i) => (harness as LedgerHarness).spend(id, 1 + (i % 3), later)),
        ...Array.from({ length: 20 }, (_, i) => ledger.balance(id, NO_REFILL, later + i)),
        ...Array.from({ length: 10 }, (_, i) => ledger.add(id, NO_REFILL, change(5, `late${i}`), later)),
      ]);
      const spent = runs.slice(0, 300).reduce((t: number, ok, i) => t + (ok ? 1 + (i % 3) : 0), 0);
      const { balance, sum } = await ledgerSum(ledger, id, later + 1_000);
      expect(balance).toBe(1000 - 30 + 50 - spent);
      expect(sum).toBe(balance);
      const entries = await allEntries(ledger, id, 7);
      expect(entries[entries.length - 1]).toMatchObject({ type: 'opening' });
      expect(entries.filter((e) => e.type === 'opening')).toHaveLength(1);
    });
  });
}
