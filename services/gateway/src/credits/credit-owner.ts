import type { CustomerRecord } from '../customers/customer-store.js';
import type { KeyRecord } from '../keys/key-store.js';
import { calendarFor, UTC_CALENDAR } from '../limits/calendar.js';
import { creditTermsIn, type PlanBook } from '../plans/plans.js';
import type { CustomerRef } from '../webhooks/event-types.js';
import type { CreditRule, CreditTerms } from './credit-terms.js';

/**
 * Whose balance it is: a customer, or a key without one (it stands for itself). Every reader and
 * writer of a balance (the admin routes, the portal, GET /v1/usage, the invoice) goes through one
 * of these, so a customer's and a lone key's credits follow the same code.
 */
export interface CreditOwner {
  kind: 'customer' | 'key';
  /** The balance's id in the ledger and the limiter: the customer's id, or the key's. */
  id: string;
  /** The terms in force (the owner's own, else its plan's); undefined: it spends no credits. */
  terms: CreditTerms | undefined;
  /** Whose calendar a refill every `period` or `day` follows: the customer's billing, UTC for a key. */
  rule: CreditRule;
  /** Who the credit webhooks name: the key itself, or the customer and its plan. */
  ref: KeyRecord | CustomerRef;
}

export function customerOwner(plans: PlanBook, customer: CustomerRecord): CreditOwner {
  const terms = creditTermsIn(plans, customer.plan, customer.credits);
  return {
    kind: 'customer',
    id: customer.id,
    terms,
    rule: { refill: terms?.refill ?? null, calendar: calendarFor(customer.billing) },
    ref: { customerId: customer.id, plan: customer.plan },
  };
}

/** A key standing for itself (the caller has checked it has no customer): its periods are UTC months. */
function keyOwner(plans: PlanBook, key: KeyRecord): CreditOwner {
  const terms = creditTermsIn(plans, key.plan, key.credits);
  return {
    kind: 'key',
    id: key.id,
    terms,
    rule: { refill: terms?.refill ?? null, calendar: UTC_CALENDAR },
    ref: key,
  };
}

/** The record a balance belongs to, as plain data (an Idempotency-Key's plan keeps it sealed as JSON). */
export type CreditRecord = { kind: 'customer'; record: CustomerRecord } | { kind: 'key'; record: KeyRecord };

export const creditOwnerOf = (plans: PlanBook, of: CreditRecord): CreditOwner =>
  of.kind === 'customer' ? customerOwner(plans, of.record) : keyOwner(plans, of.record);
