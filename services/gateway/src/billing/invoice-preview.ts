import { ApiError } from '@animal-store/common/errors.js';
import type { CreditLedger } from '../credits/credit-ledger.js';
import { creditsSpent } from '../credits/credits-spent.js';
import type { CreditAnnouncer } from '../credits/owner-credits.js';
import { subjectHistory } from '../customers/subject-history.js';
import type { KeyRecord } from '../keys/key-store.js';
import { DEFAULT_BILLING } from '../limits/billing-period.js';
import type { PlanBook } from '../plans/plans.js';
import type { UsageHistory } from '../usage/usage-history.js';
import type { CustomerRef } from '../webhooks/event-types.js';
import { type CreditRecord, creditOwnerOf } from './credit-owner.js';
import { type Invoice, InvoiceTooLargeError, invoiceFor } from './invoice.js';

/** What a preview reads: the plans, the usage history, the ledger (and who hears of a refill it applies), the clock. */
export interface InvoicePreviewDeps {
  plans: PlanBook;
  history: UsageHistory;
  credits: CreditLedger;
  webhooks: CreditAnnouncer<KeyRecord | CustomerRef>;
  now(): number;
}

export type InvoicePeriod = 'current' | 'previous';

const NOUN = { customer: 'Customer', key: 'Key' } as const;

/**
 * The invoice for one billing period of a customer or of a key standing for itself (the record a
 * balance belongs to: one code for both, as their credits have). Its units are the usage
 * history's own for that period: a customer's the same call its history route makes, in its
 * calendar; a lone key's its own hours over the UTC month from the 1st (DEFAULT_BILLING), the
 * month its refills, its month window and its history's `period` use, so each agrees with its
 * history route. Its credits are the ledger's spend in it. 409 for a plan without a price. The
 * portal shows the signed-in customer the same preview (portal/invoice-routes.ts). A history it
 * cannot read goes to `unavailable` (the listener's 503).
 */
export async function invoicePreview(
  deps: InvoicePreviewDeps,
  of: CreditRecord,
  period: InvoicePeriod,
  unavailable: (err: unknown) => never,
) {
  const { id, name, plan } = of.record;
  const price = deps.plans.plans.get(plan)?.price;
  if (!price) {
    throw new ApiError(
      409,
      'conflict',
      `${NOUN[of.kind]} ${id}'s plan ${plan} has no price: give it one in PLANS_FILE (plans.${plan}.price)`,
    );
  }
  const now = deps.now();
  const billing = of.kind === 'customer' ? of.record.billing : DEFAULT_BILLING;
  const history = await subjectHistory(
    deps.history,
    { id, name, billing },
    { period, granularity: 'period' },
    now,
    unavailable,
  );
  const from = Date.parse(history.from);
  const to = Date.parse(history.to);
  const owner = creditOwnerOf(deps.plans, of);
  const credits = owner.terms ? await creditsSpent(deps, owner, from, to, now) : null;
  let invoice: Invoice;
  try {
    invoice = invoiceFor(price, history.totals.units, credits);
  } catch (err) {
    if (err instanceof InvoiceTooLargeError) throw new ApiError(409, 'conflict', err.message);
    throw err;
  }
  return {
    id,
    name,
    plan,
    period,
    from: history.from,
    to: history.to,
    units: history.totals.units,
    creditsUsed: credits,
    ...invoice,
  };
}
