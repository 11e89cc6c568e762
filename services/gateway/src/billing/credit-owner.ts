import type { CreditOwner } from '../credits/credit-terms.js';
import type { CustomerRecord } from '../customers/customer-store.js';
import type { KeyRecord } from '../keys/key-store.js';
import { calendarFor, UTC_CALENDAR } from '../limits/calendar.js';
import { creditTermsIn, type PlanBook } from '../plans/plans.js';
import type { CustomerRef } from '../webhooks/event-types.js';

/*
 * Who is billed for a balance, made from the record it belongs to: a customer, or a key without
 * one. The terms come from the record or its plan, the calendar from the customer's billing.
 */

/** A balance's owner as the gateway's readers have it: its webhooks name the key, or the customer and its plan. */
export type RecordOwner = CreditOwner<KeyRecord | CustomerRef>;

export function customerOwner(plans: PlanBook, customer: CustomerRecord): RecordOwner {
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
function keyOwner(plans: PlanBook, key: KeyRecord): RecordOwner {
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

export const creditOwnerOf = (plans: PlanBook, of: CreditRecord): RecordOwner =>
  of.kind === 'customer' ? customerOwner(plans, of.record) : keyOwner(plans, of.record);
