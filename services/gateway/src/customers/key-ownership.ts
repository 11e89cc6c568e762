import { LIMIT_FIELDS, type Limits, limitsFor, type PlanBook, WINDOW_NAMES } from '../plans/plans.js';
import type { CustomerRecord, CustomerStore } from './customer-store.js';

/**
 * What a key of a customer may be: on its customer's plan (the plan sits on the customer), with
 * own limits, if any, no looser than the customer's in force on any window both have. A window
 * the customer lacks is always tighter than none. Scopes and addresses stay per key. The admin
 * API and the CLI reach it through keyOwnership; a keys file's keys are checked with it as loaded.
 */
export function keyOfCustomerProblem(
  plans: PlanBook,
  customer: CustomerRecord,
  key: { plan?: string | undefined; limits?: Limits | undefined },
): string | null {
  if (key.plan !== undefined && key.plan !== customer.plan) {
    return `plan: keys of customer ${customer.id} are on its plan (${customer.plan}); leave plan out or change the customer's`;
  }
  if (!key.limits) return null;
  const shared = limitsFor(plans, customer.plan, customer.limits);
  for (const name of WINDOW_NAMES) {
    const field = LIMIT_FIELDS[name];
    const own = key.limits[field];
    const customers = shared[field];
    if (own !== undefined && customers !== undefined && own > customers) {
      return `limits.${field} (${own}) cannot exceed customer ${customer.id}'s ${customers}: a key's own limits can only be tighter`;
    }
  }
  return null;
}

/** A key request the customer rules refuse: answered 400 by the admin API. */
export class KeyOwnershipError extends Error {}

/** The customer a key request names; refused when there is no such live customer. */
async function ownerOf(store: Pick<CustomerStore, 'get'>, customerId: string): Promise<CustomerRecord> {
  const customer = await store.get(customerId);
  if (!customer) throw new KeyOwnershipError(`customerId: no customer ${JSON.stringify(customerId.slice(0, 64))}`);
  return customer;
}

/** What a key create or change asks that the customer rules look at. */
export interface OwnershipRequest {
  plan?: string | undefined;
  /** null: back to the plan's. */
  limits?: Limits | null | undefined;
  /** A customer to belong to; null: to stand alone (a change only). */
  customerId?: string | null | undefined;
}

/**
 * The one rule for which customer a key belongs to and so which plan it is on, for every path that
 * makes or changes keys (the admin API's create and PATCH, the keys CLI's --file): the customer
 * it names, or, for a change that names none, the one it has. A key of a customer is on the
 * customer's plan, with own limits no looser than its; an unknown customer is refused
 * (KeyOwnershipError). A key without one keeps the plan asked for, or the one it has.
 * `current` is the key as it stands, null for a new key.
 */
export async function keyOwnership(
  plans: PlanBook,
  customers: Pick<CustomerStore, 'get'>,
  current: { plan: string; limits?: Limits | undefined; customerId?: string | undefined } | null,
  request: OwnershipRequest,
): Promise<{ plan: string | undefined; customerId: string | undefined }> {
  const customerId = request.customerId === undefined ? current?.customerId : (request.customerId ?? undefined);
  if (customerId === undefined) return { plan: request.plan ?? current?.plan, customerId };
  const customer = await ownerOf(customers, customerId);
  const limits = request.limits === undefined ? current?.limits : (request.limits ?? undefined);
  const problem = keyOfCustomerProblem(plans, customer, { plan: request.plan, limits });
  if (problem) throw new KeyOwnershipError(problem);
  return { plan: customer.plan, customerId: customer.id };
}
