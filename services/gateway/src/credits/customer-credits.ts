import { ApiError } from '@animal-store/common/errors.js';
import { iso } from '../admin/shared.js';
import type { CustomerRecord } from '../customers/customer-store.js';
import type { GatewayDeps } from '../deps.js';
import { calendarFor } from '../limits/calendar.js';
import { BadCursorError, DEFAULT_PAGE_SIZE } from '../paging/page.js';
import { type CreditEntry, HOUR_MS } from './credit-ledger.js';
import { type CreditRule, refillPeriod } from './credit-terms.js';

/*
 * A customer's credits as every reader shows them: the admin API, GET /v1/usage and the portal.
 * One place, so the three agree on the balance, the next refill and the ledger's entries, and so a
 * refill a read applies is announced whichever of them made the read.
 */

type Deps = Pick<GatewayDeps, 'credits' | 'webhooks' | 'now'>;

/** The customer's credit terms as the ledger applies them (no refill for one without credits). */
export const creditRuleOf = (customer: CustomerRecord): CreditRule => ({
  refill: customer.credits?.refill ?? null,
  calendar: calendarFor(customer.billing),
});

const openHourView = (open: { start: number; spent: number } | null) =>
  open ? { start: iso(open.start), end: iso(open.start + HOUR_MS), spent: open.spent } : null;

function entryView({ end, at, ...rest }: CreditEntry) {
  return { ...rest, at: iso(at), ...(end !== undefined ? { end: iso(end) } : {}) };
}

/**
 * Announces what a read or change did to the balance: a refill it applied, a threshold an
 * adjustment crossed; the same events as the limiter's, named by the customer alone.
 */
export function announceCredits(
  deps: Pick<GatewayDeps, 'webhooks'>,
  customer: CustomerRecord,
  before: number,
  after: number,
  refilled: number,
): void {
  deps.webhooks.onCredits(
    { customerId: customer.id, plan: customer.plan },
    { before, after, refilled },
    customer.credits?.refill?.amount ?? null,
  );
}

/**
 * The customer's balance now (a refill due is applied, and announced), this hour's spend so far,
 * and when the next refill is due (null without credit terms or without a refill in them).
 */
export async function customerCredits(deps: Deps, customer: CustomerRecord) {
  const now = deps.now();
  const rule = creditRuleOf(customer);
  const { balance, openHour, refilled } = await deps.credits.balance(customer.id, rule, now);
  announceCredits(deps, customer, balance, balance, refilled);
  const next = customer.credits ? refillPeriod(rule, now) : null;
  return { balance, openHour: openHourView(openHour), nextRefillAt: next ? iso(next.nextAt) : null };
}

/**
 * A page of the customer's ledger, newest first, with the balance it sums to: the balance is read
 * first, since that closes a past hour's spend into the ledger the page then shows. A cursor the
 * ledger did not give out is refused with 400.
 */
export async function customerLedger(deps: Deps, customer: CustomerRecord, limit?: number, after?: string) {
  const { balance, openHour } = await customerCredits(deps, customer);
  try {
    const page = await deps.credits.page(customer.id, {
      limit: limit ?? DEFAULT_PAGE_SIZE,
      ...(after !== undefined ? { after } : {}),
    });
    return { balance, openHour, items: page.items.map(entryView), next: page.next };
  } catch (err) {
    if (err instanceof BadCursorError) throw new ApiError(400, 'invalid_request', `after: ${err.message}`);
    throw err;
  }
}
