import { ApiError } from '@animal-store/common/errors.js';
import type { CustomerStore } from '../customers/customer-store.js';
import { KeyOwnershipError, keyOwnership } from '../customers/key-ownership.js';
import type { PlanBook } from '../plans/plans.js';
import { createKey } from './create-key.js';
import { checkNewKey, type KeyRequest, KeyRuleError } from './key-operations.js';
import type { KeyRecord } from './key-store.js';

/*
 * What the admin API and the portal ask of keys alike: a new key for a customer or a plan, and a
 * key operation whose refusals are the caller's 400.
 */

/** Runs a key operation (key-operations.ts), answering what its rules refuse with a 400. */
export async function applying<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    if (err instanceof KeyRuleError || err instanceof KeyOwnershipError) {
      throw new ApiError(400, 'invalid_request', err.message);
    }
    throw err;
  }
}

/** What a caller asks of a new key: its plan, or the customer whose plan it takes. */
export interface NewKeyRequest extends Omit<KeyRequest, 'plan'> {
  plan?: string;
  customerId?: string;
}

/** A new key's record: of the customer it names (on its plan), or on the plan it names. */
export async function newKey(
  deps: { plans: PlanBook; customerStore: Pick<CustomerStore, 'get'> },
  body: NewKeyRequest,
  now: number,
): Promise<{ key: string; record: KeyRecord }> {
  const { plan, customerId } = await keyOwnership(deps.plans, deps.customerStore, null, body);
  if (plan === undefined) throw new KeyRuleError('plan is required (or customerId, for its plan)');
  const made = createKey(checkNewKey(deps.plans, { ...body, plan }, now), new Date(now));
  if (customerId !== undefined) made.record.customerId = customerId;
  return made;
}
