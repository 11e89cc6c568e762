import { BadCursorError, type Page, type PageRequest } from '../paging/page.js';
import {
  type CreditAddResult,
  type CreditBalance,
  type CreditBatch,
  type CreditChange,
  type CreditEntry,
  type CreditLedger,
  DEFAULT_LEDGER_RETENTION_MS,
  ENTRY_ID,
  HOUR_MS,
  openingEntry,
  type RefundOnce,
  TRIM_BATCH,
} from './credit-ledger.js';
import { type CreditRule, refillDue, refillPeriod } from './credit-terms.js';

const sequenceOf = (id: string): number => Number(id.slice(id.indexOf('-') + 1));

/** A balance as credit-script.ts keeps it in Redis, and its ledger. */
interface Balance {
  balance: number;
  /** The UTC hour (an index) whose spend is open, and that spend so far. */
  hour: number;
  spent: number;
  /** The last hour closed with a spend, and what of it a late refund may still give back. */
  closedHour: number;
  closedSpent: number;
  /** The latest refill period seen (its name, `every:<start ms>`): refillDue compares its start. */
  refilledFor: string;
  /** `credits.exhausted` was announced, and credits have not come back since (credit-script.ts, `x`). */
  exhausted: boolean;
  /** The balance just after the last top-up, grant or upward adjustment; 0: none (credit-script.ts, `m`). */
  raisedTo: number;
  entries: CreditEntry[];
  /** Entry ids by the reference they were made under. */
  refs: Map<string, string>;
  /** The entries trimmed off so far, summed: shown as the ledger's oldest entry, under the newest one's id. */
  opening: { id: string; amount: number } | null;
}

const msOf = (id: string): number => Number(id.slice(0, id.indexOf('-')));

/**
 * The embedded balances and ledgers: the memory limiter spends from them in its step and the admin
 * API reads and changes them, in one process (the same rules as the Redis script's).
 */
export class MemoryCreditLedger implements CreditLedger {
  private readonly balances = new Map<string, Balance>();
  /**
   * Refunds made under a reference, each until its keepUntil (a spool's replay; embedded mode has
   * no spool, so few or none). Forgotten then, as Redis forgets its mark: nothing grows for ever.
   */
  private readonly refunded = new Map<string, number>();
  private sequence = 0;

  /** `retentionMs`: entries written longer ago are carried into the opening entry (CREDITS_LEDGER_DAYS). */
  constructor(private readonly retentionMs = DEFAULT_LEDGER_RETENTION_MS) {}

  /** Carries the entries written before the retention into the opening, as the Redis script does. */
  private trim(held: Balance, now: number): void {
    const cutoff = now - this.retentionMs;
    let trimmed = 0;
    while (trimmed < TRIM_BATCH && held.entries.length > 0 && msOf((held.entries[0] as CreditEntry).id) < cutoff) {
      const entry = held.entries.shift() as CreditEntry;
      // A reference is only ever retried within the Idempotency-Key's day: an old one can go.
      // Stryker disable next-line ConditionalExpression: deleting `undefined` from refs is a no-op
      if (entry.ref !== undefined) held.refs.delete(entry.ref);
      held.opening = { id: entry.id, amount: (held.opening?.amount ?? 0) + entry.amount };
      trimmed++;
    }
  }

  private append(held: Balance, entry: Omit<CreditEntry, 'id'>, now: number): string {
    const id = `${now}-${this.sequence++}`;
    held.entries.push({ id, ...entry });
    return id;
  }

  /** The balance with a past hour's spend closed and a refill due applied; `refilled` what it added. */
  state(owner: string, rule: CreditRule | undefined, now: number): { held: Balance; refilled: number } {
    let held = this.balances.get(owner);
    if (!held) {
      held = {
        balance: 0,
        hour: 0,
        spent: 0,
        // Stryker disable next-line UnaryOperator: an hour 1 with closedSpent 0 gives nothing back either
        closedHour: -1,
        closedSpent: 0,
        // Stryker disable next-line StringLiteral: any name without a readable start is due a refill, as '' is
        refilledFor: '',
        exhausted: false,
        raisedTo: 0,
        entries: [],
        refs: new Map(),
        opening: null,
      };
      this.balances.set(owner, held);
    }
    const hour = Math.floor(now / HOUR_MS);
    if (hour > held.hour) {
      if (held.spent > 0) {
        const at = held.hour * HOUR_MS;
        this.append(held, { type: 'spend', amount: -held.spent, at, end: at + HOUR_MS }, now);
        held.closedHour = held.hour;
        held.closedSpent = held.spent;
      }
      held.spent = 0;
      held.hour = hour;
    }
    let refilled = 0;
    const period = rule ? refillPeriod(rule, now) : null;
    const amount = rule?.refill?.amount ?? 0;
    if (period && refillDue(held.refilledFor, period)) {
      held.refilledFor = period.name;
      if (held.balance < amount) {
        refilled = amount - held.balance;
        held.balance = amount;
        held.exhausted = false;
        this.append(held, { type: 'refill', amount: refilled, at: now, period: period.name }, now);
      }
    }
    return { held, refilled };
  }

  /** The limiter's spend of an admitted request, into the open hour; one that leaves 0 exhausts it. */
  spend(held: Balance, units: number): CreditBatch['exhausted'] {
    held.balance -= units;
    held.spent += units;
    return held.balance === 0 ? this.exhaust(held, 0) : undefined;
  }

  /**
   * The balance cannot pay (a request of `cost` refused; no cost: it reached 0): what to announce
   * when this is the first time since credits came back, else undefined (the script's creditsExhaust).
   */
  exhaust(held: Balance, balance: number, cost?: number): CreditBatch['exhausted'] {
    if (held.exhausted) return undefined;
    held.exhausted = true;
    return cost === undefined ? { balance } : { balance, cost };
  }

  async balance(owner: string, rule: CreditRule, now: number): Promise<CreditBalance> {
    const { held, refilled } = this.state(owner, rule, now);
    this.trim(held, now);
    const openHour = held.spent > 0 ? { start: held.hour * HOUR_MS, spent: held.spent } : null;
    return { balance: held.balance, openHour, refilled };
  }

  async add(owner: string, rule: CreditRule, change: CreditChange, now: number): Promise<CreditAddResult> {
    const { held, refilled } = this.state(owner, rule, now);
    this.trim(held, now);
    const made = held.refs.get(change.ref);
    if (made !== undefined) return { outcome: 'held', entryId: made, balance: held.balance, refilled };
    if (held.balance + change.amount < 0) return { outcome: 'short', balance: held.balance, refilled };
    held.balance += change.amount;
    const { type, amount, at, reason, ref } = change;
    const entryId = this.append(held, { type, amount, at, reason, ref }, now);
    held.refs.set(ref, entryId);
    // Credits came back: the balance may announce again; an adjustment down to 0 announces.
    if (amount > 0) {
      held.exhausted = false;
      held.raisedTo = held.balance;
    }
    const exhausted = held.balance === 0 ? this.exhaust(held, 0) : undefined;
    return {
      outcome: 'added',
      entryId,
      balance: held.balance,
      refilled,
      ...(exhausted ? { exhausted: true } : {}),
      ...(held.raisedTo > 0 ? { raisedTo: held.raisedTo } : {}),
    };
  }

  async refund(
    owner: string,
    rule: CreditRule,
    hour: number,
    units: number,
    now: number,
    once?: RefundOnce,
  ): Promise<number> {
    if (once) {
      this.forgetRefundsBefore(now);
      if (this.refunded.has(once.ref)) return 0;
      this.refunded.set(once.ref, once.keepUntil);
    }
    const { held } = this.state(owner, rule, now);
    const index = Math.floor(hour / HOUR_MS);
    let back = 0;
    // A replica whose clock is a little ahead admitted into the hour the ledger still has open.
    if (index >= held.hour) {
      back = Math.min(units, held.spent);
      held.spent -= back;
    } else if (index === held.closedHour) {
      back = Math.min(units, held.closedSpent);
      held.closedSpent -= back;
      const at = index * HOUR_MS;
      if (back > 0) this.append(held, { type: 'refund', amount: back, at, end: at + HOUR_MS }, now);
    }
    held.balance += back;
    return back;
  }

  /** Drops the marks kept until `now` or before, oldest first (keepUntil is now plus one constant). */
  private forgetRefundsBefore(now: number): void {
    for (const [ref, keepUntil] of this.refunded) {
      if (keepUntil > now) return;
      this.refunded.delete(ref);
    }
  }

  async page(owner: string, request: PageRequest): Promise<Page<CreditEntry>> {
    const held = this.balances.get(owner);
    // The opening's id is its newest trimmed entry's: before every entry still held, as its place is.
    const entries = held?.opening
      ? [openingEntry(held.opening.id, held.opening.amount), ...held.entries]
      : (held?.entries ?? []);
    let end = entries.length;
    if (request.after !== undefined) {
      if (!ENTRY_ID.test(request.after)) throw new BadCursorError();
      // Entries before the one named, as a stream's range would be (ids carry this ledger's sequence).
      const sequence = sequenceOf(request.after);
      while (end > 0 && sequenceOf((entries[end - 1] as CreditEntry).id) >= sequence) end--;
    }
    const start = Math.max(0, end - request.limit);
    const items = entries.slice(start, end).reverse();
    return { items, next: start > 0 ? (items[items.length - 1]?.id ?? null) : null };
  }
}
