import { LIMIT_FIELDS, type Limits, limitsFor, type PlanBook, WINDOW_NAMES } from '../plans/plans.js';
import type { CustomerRecord, CustomerStore } from './customer-store.js';

/**
 * What a key of a customer may be: on its customer's plan (the plan sits on the customer), with
 * own limits, if any, no looser than the customer's in force on any window both have. A window
 * the customer lacks is always tighter than none. Scopes and addresses stay per key.
 */
function keyOfCustomerProblem(
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
export async function ownerOf(store: Pick<CustomerStore, 'get'>, customerId: string): Promise<CustomerRecord> {
  const customer = await store.get(customerId);
  if (!customer) throw new KeyOwnershipError(`customerId: no customer ${JSON.stringify(customerId.slice(0, 64))}`);
  return customer;
}

/**
 * The plan a key request comes to when it names a customer (the customer's), after checking that
 * the request fits the customer; the request's own plan otherwise.
 */
export function planWithCustomer(
  plans: PlanBook,
  customer: CustomerRecord | null,
  request: { plan?: string | undefined; limits?: Limits | undefined },
): string | undefined {
  if (!customer) return request.plan;
  const problem = keyOfCustomerProblem(plans, customer, request);
  if (problem) throw new KeyOwnershipError(problem);
  return customer.plan;
}
