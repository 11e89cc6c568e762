import { ApiError } from '@animal-store/common/errors.js';
import { BadCursorError, DEFAULT_PAGE_SIZE } from '../paging/page.js';
import { type CreditBatch, type CreditEntry, type CreditLedger, HOUR_MS } from './credit-ledger.js';
import { type CreditOwner, refillPeriod } from './credit-terms.js';

/*
 * A balance's credits as every reader shows them: the admin API (a customer's, a lone key's),
 * GET /v1/usage and the portal. One place, so they agree on the balance, the next refill and the
 * ledger's entries, and so a refill a read applies is announced whichever of them made the read.
 */

/** Who hears what a read did to a balance (the gateway's Webhooks): `ref` is the owner's. */
export interface CreditAnnouncer<Ref> {
  onCredits(ref: Ref, batch: CreditBatch, refillAmount: number | null): void;
}

/** What a read of a balance needs: the ledger, who hears of a refill it applied, the clock. */
interface Deps<Ref> {
  credits: CreditLedger;
  webhooks: CreditAnnouncer<Ref>;
  now(): number;
}

const iso = (ms: number) => new Date(ms).toISOString();

const openHourView = (open: { start: number; spent: number } | null) =>
  open ? { start: iso(open.start), end: iso(open.start + HOUR_MS), spent: open.spent } : null;

function entryView({ end, at, ...rest }: CreditEntry) {
  return { ...rest, at: iso(at), ...(end !== undefined ? { end: iso(end) } : {}) };
}

/**
 * Announces what a read or change did to the balance: a refill it applied, a threshold an
 * adjustment crossed; the same events as the limiter's, named by the customer (or the lone key).
 */
export function announceCredits<Ref>(
  deps: { webhooks: CreditAnnouncer<Ref> },
  owner: CreditOwner<Ref>,
  batch: CreditBatch,
): void {
  deps.webhooks.onCredits(owner.ref, batch, owner.terms?.refill?.amount ?? null);
}

/**
 * The balance now (a refill due is applied, and announced), this hour's spend so far, and when
 * the next refill is due (null without credit terms or without a refill in them).
 */
export async function ownerCredits<Ref>(deps: Deps<Ref>, owner: CreditOwner<Ref>) {
  const now = deps.now();
  const { balance, openHour, refilled } = await deps.credits.balance(owner.id, owner.rule, now);
  announceCredits(deps, owner, { before: balance, after: balance, refilled });
  // Stryker disable next-line ConditionalExpression: without terms the rule has no refill, so refillPeriod is null too
  const next = owner.terms ? refillPeriod(owner.rule, now) : null;
  return { balance, openHour: openHourView(openHour), nextRefillAt: next ? iso(next.nextAt) : null };
}

/**
 * A page of the ledger, newest first, with the balance it sums to: the balance is read first,
 * since that closes a past hour's spend into the ledger the page then shows. A cursor the ledger
 * did not give out is refused with 400.
 */
export async function ownerLedger<Ref>(deps: Deps<Ref>, owner: CreditOwner<Ref>, limit?: number, after?: string) {
  const { balance, openHour } = await ownerCredits(deps, owner);
  try {
    const page = await deps.credits.page(owner.id, {
      // Stryker disable next-line LogicalOperator: both callers' query schemas default `limit`
      limit: limit ?? DEFAULT_PAGE_SIZE,
      // Stryker disable next-line ConditionalExpression: both ledgers read `after: undefined` as no cursor
      ...(after !== undefined ? { after } : {}),
    });
    return { balance, openHour, items: page.items.map(entryView), next: page.next };
  } catch (err) {
    if (err instanceof BadCursorError) throw new ApiError(400, 'invalid_request', `after: ${err.message}`);
    throw err;
  }
}
