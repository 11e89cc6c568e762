/** How often a balance is refilled: each billing period (from the anchor day) or each day, in its calendar. */
export type RefillEvery = 'period' | 'day';
const REFILL_EVERY: readonly RefillEvery[] = ['period', 'day'];

/**
 * What a customer (or a key standing for itself) holds credits on: every admitted request spends
 * its cost from the balance. `refill`: at the start of each period or day the balance is brought
 * up to `amount` (never lowered: what was topped up above it stays).
 */
export interface CreditTerms {
  refill?: { amount: number; every: RefillEvery };
}

/** The change that drops a record's own credit terms (`"credits": "plan"`, the CLI's --plan-credits). */
export const PLAN_CREDITS = 'plan';

/**
 * What a change may give for credit terms: terms of its own, `null` (none, even if its plan has
 * some; stored as null) or `'plan'` (its own dropped, so its plan's apply again; billing/credit-owner.ts).
 */
export type CreditTermsChange = CreditTerms | null | typeof PLAN_CREDITS;

/** The largest balance or entry the ledger takes: well inside a Lua number's exact integers. */
export const MAX_CREDITS = 1_000_000_000_000;

/** Why these terms cannot be stored, in the caller's words, or undefined when they can. */
export function creditTermsProblem(terms: unknown, at = 'credits'): string | undefined {
  if (typeof terms !== 'object' || terms === null || Array.isArray(terms)) return `${at} must be an object`;
  for (const field of Object.keys(terms)) {
    if (field !== 'refill') return `${at}.${field} is not a field of credits (refill)`;
  }
  const refill = (terms as CreditTerms).refill;
  if (refill === undefined) return undefined;
  if (typeof refill !== 'object' || refill === null) return `${at}.refill must be { amount, every }`;
  const { amount, every } = refill;
  if (!Number.isSafeInteger(amount) || amount < 1 || amount > MAX_CREDITS) {
    return `${at}.refill.amount must be a whole number from 1 to ${MAX_CREDITS}`;
  }
  if (!REFILL_EVERY.includes(every)) return `${at}.refill.every must be 'period' or 'day'`;
  return undefined;
}

/** Terms as stored, whatever else the given object carried: only the fields creditTermsProblem checked. */
export function storedCreditTerms(terms: CreditTerms): CreditTerms {
  return terms.refill ? { refill: { amount: terms.refill.amount, every: terms.refill.every } } : {};
}

/** What a refill asks of the owner's calendar (a Calendar, limits/calendar.ts): its day's or month's bounds. */
export interface RefillCalendar {
  start(name: 'day' | 'month', now: number): number;
  end(name: 'day' | 'month', now: number): number;
}

/** The terms a limit policy carries: the refill, in the calendar of the owner of the balance. */
export interface CreditRule {
  refill: { amount: number; every: RefillEvery } | null;
  calendar: RefillCalendar;
}

/**
 * Whose balance it is: a customer, or a key without one (it stands for itself). Every reader and
 * writer of a balance (the admin routes, the portal, GET /v1/usage, the invoice) goes through one
 * of these (billing/credit-owner.ts makes them), so a customer's and a lone key's credits follow
 * the same code.
 */
export interface CreditOwner<Ref = unknown> {
  kind: 'customer' | 'key';
  /** The balance's id in the ledger and the limiter: the customer's id, or the key's. */
  id: string;
  /** The terms in force (the owner's own, else its plan's); undefined: it spends no credits. */
  terms: CreditTerms | undefined;
  /** Whose calendar a refill every `period` or `day` follows: the customer's billing, UTC for a key. */
  rule: CreditRule;
  /** Who the credit webhooks name (the key itself, or the customer and its plan): handed on, not read. */
  ref: Ref;
}

/**
 * The refill period holding `now`: its name (`period:<start ms>`), which a balance keeps to know it
 * was refilled in it, its start, and when the next one starts; null without a refill.
 */
export function refillPeriod(rule: CreditRule, now: number): { name: string; start: number; nextAt: number } | null {
  if (!rule.refill) return null;
  const window = rule.refill.every === 'day' ? 'day' : 'month';
  const start = rule.calendar.start(window, now);
  return { name: `${rule.refill.every}:${start}`, start, nextAt: rule.calendar.end(window, now) };
}

/**
 * Whether a balance last refilled for the period named `last` ('' for never) is due a refill in
 * `period`: only when `period` starts later. A period's name changes with the calendar (an anchor
 * day, a zone, `every`) while its start may go back, so comparing names refilled a period again at
 * each change back and forth; the start instant only moves forward, and each is refilled once. A
 * replica whose clock lags behind a period's start likewise refills nothing. The limit script's
 * creditsRead (credit-script.ts) applies the same rule in Lua.
 */
export function refillDue(last: string, period: { start: number }): boolean {
  const refilled = Number(last.slice(last.lastIndexOf(':') + 1));
  return last === '' || Number.isNaN(refilled) || period.start > refilled;
}
