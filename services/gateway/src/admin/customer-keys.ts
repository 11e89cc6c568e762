import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyBaseLogger } from 'fastify';
import { audit } from '../api/audit.js';
import type { CustomerRecord } from '../customers/customer-store.js';
import type { GatewayDeps } from '../deps.js';
import { updateKey } from '../keys/key-operations.js';
import type { KeyRecord } from '../keys/key-store.js';
import { limitsAfterChange, planProblem } from '../plans/plans.js';
import { announceKeyChange } from '../replicas/key-sync.js';

/* What a change to a customer does to its keys: each key change audited and announced, as the key routes do. */

type Deps = Pick<GatewayDeps, 'plans' | 'keyStore' | 'keyResolver' | 'events' | 'metrics' | 'webhooks' | 'now'>;

/**
 * The customer's live keys that a plan change takes along, read once for the check and the move;
 * refused (409) when one of them could not make it (a plan without windows, say).
 */
export async function keysThatFollow(deps: Deps, customerId: string, plan: string): Promise<KeyRecord[]> {
  const keys = await deps.keyStore.liveKeysOf(customerId);
  for (const key of keys) {
    const limits = limitsAfterChange(deps.plans, key.plan, plan, undefined, key.limits);
    const problem = planProblem(deps.plans, plan, limits);
    if (problem)
      throw new ApiError(409, 'conflict', `Key ${key.id} of this customer cannot move to ${plan}: ${problem}`);
  }
  return keys;
}

/**
 * A customer's keys (keysThatFollow's) follow it to its new plan (the plan sits on the customer),
 * each as a plan change of its own: audited, announced to the replicas, own limits replaced by the
 * plan's.
 */
export async function moveKeysToPlan(
  deps: Deps,
  customer: CustomerRecord,
  keys: readonly KeyRecord[],
  log: FastifyBaseLogger,
): Promise<void> {
  for (const key of keys) {
    if (key.plan === customer.plan) continue;
    const moved = await updateKey(deps.plans, deps.keyStore, key, { plan: customer.plan }, deps.now());
    if (!moved) continue; // revoked meanwhile
    await announceKeyChange(deps, 'key-changed', key.id, log);
    audit(
      deps,
      log,
      'key.updated',
      { keyId: key.id },
      {
        changed: ['plan'],
        from: key.plan,
        to: customer.plan,
        customerId: customer.id,
      },
    );
  }
}

/**
 * Before a customer is deleted: its live keys are revoked when asked (each audited and announced),
 * else their being there refuses the deletion (409). Answers how many it revoked.
 */
export async function revokeKeysOf(
  deps: Deps,
  customerId: string,
  revoke: boolean,
  at: Date,
  log: FastifyBaseLogger,
): Promise<number> {
  const keys = await deps.keyStore.liveKeysOf(customerId);
  if (keys.length > 0 && !revoke) {
    const them = keys.length === 1 ? 'it' : 'them';
    throw new ApiError(
      409,
      'conflict',
      `Customer ${customerId} has ${keys.length} live key${keys.length === 1 ? '' : 's'}: revoke ${them} first, or delete with ?revokeKeys=true`,
    );
  }
  let revoked = 0;
  for (const key of keys) {
    if (!(await deps.keyStore.revoke(key.id, at))) continue;
    revoked++;
    await announceKeyChange(deps, 'key-revoked', key.id, log);
    audit(deps, log, 'key.revoked', { keyId: key.id }, { customerId });
  }
  return revoked;
}
