import { ApiError, clipped } from '@animal-store/common/errors.js';
import type { Static } from 'typebox';
import type { CustomerRecord } from '../customers/customer-store.js';
import type { GatewayDeps } from '../deps.js';
import type { KeyRecord } from '../keys/key-store.js';
import { creditTermsIn, limitsFor, scopesFor } from '../plans/plans.js';
import type { Subscription } from '../webhooks/subscriptions/webhook-store.js';
import type { CreatedKeySchema, KeyViewSchema } from './schemas.js';

export type Source = 'store' | 'file';

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** A key by id, from API_KEYS_FILE first, then the store; 404 when neither has it. */
export async function findKey(
  deps: Pick<GatewayDeps, 'keyResolver' | 'keyStore'>,
  id: string,
): Promise<{ record: KeyRecord; source: Source }> {
  const fromFile = deps.keyResolver.fileRecord(id);
  if (fromFile) return { record: fromFile, source: 'file' };
  const record = await deps.keyStore.get(id);
  if (!record) throw new ApiError(404, 'not_found', `No key with id ${clipped(id)}`);
  return { record, source: 'store' };
}

/**
 * A key standing for itself (it has a balance and a bill of its own), by id; 404 when there is
 * none. A key of a customer spends and is billed as its customer: refused with 409, the message
 * saying what the key does (`spends its credits`) and the customer's route for it (`credits`).
 */
export async function findLoneKey(
  deps: Pick<GatewayDeps, 'keyResolver' | 'keyStore'>,
  id: string,
  does: string,
  customerRoute: string,
): Promise<KeyRecord> {
  const { record } = await findKey(deps, id);
  if (record.customerId !== undefined) {
    throw new ApiError(
      409,
      'conflict',
      `Key ${record.id} belongs to customer ${record.customerId} and ${does}: see /admin/customers/${record.customerId}/${customerRoute}`,
    );
  }
  return record;
}

/** A customer by id; 404 when there is none. */
export async function findCustomer(deps: Pick<GatewayDeps, 'customerStore'>, id: string): Promise<CustomerRecord> {
  const record = await deps.customerStore.get(id);
  if (!record) throw new ApiError(404, 'not_found', `No customer with id ${clipped(id)}`);
  return record;
}

/** A webhook endpoint by id; 404 when there is none. */
export async function findWebhook(deps: Pick<GatewayDeps, 'webhooks'>, id: string): Promise<Subscription> {
  const found = await deps.webhooks.store.get(id);
  if (!found) throw new ApiError(404, 'not_found', `No webhook with id ${clipped(id)}`);
  return found;
}

/** A change asked of a key API_KEYS_FILE declares: 409, saying where it is changed instead. */
export function managedInFile(id: string, doing: string): ApiError {
  return new ApiError(
    409,
    'conflict',
    `Key ${clipped(id)} is managed in a file (API_KEYS_FILE): ${doing} it there (npm run keys -- … --file PATH) and roll the gateway`,
  );
}

/** A stored, unrevoked key: what update and rotate act on. */
export async function findLiveStoreKey(
  deps: Pick<GatewayDeps, 'keyResolver' | 'keyStore'>,
  id: string,
  doing: string,
): Promise<KeyRecord> {
  const { record, source } = await findKey(deps, id);
  if (source === 'file') throw managedInFile(id, doing);
  if (record.revokedAt) throw new ApiError(409, 'conflict', `Key ${id} was revoked at ${record.revokedAt}`);
  return record;
}

/** What an operator sees of a key: never its hash, with its ban if the limiter can say. */
export async function keyView(
  deps: Pick<GatewayDeps, 'limiter' | 'plans'>,
  record: KeyRecord,
  source: Source,
): Promise<Static<typeof KeyViewSchema>> {
  let bannedUntil: number | null = null;
  try {
    bannedUntil = await deps.limiter.banEndsAt(record.id, record.customerId);
  } catch {
    // Ban state is informative here; an unreachable Redis must not hide the key.
  }
  return {
    id: record.id,
    name: record.name,
    plan: record.plan,
    ...keyRules(deps, record),
    createdAt: record.createdAt,
    source,
    ...(record.prefix ? { prefix: record.prefix } : {}),
    ...(record.expiresAt ? { expiresAt: record.expiresAt } : {}),
    ...(record.previous ? { previousKeyExpiresAt: record.previous.expiresAt } : {}),
    ...(record.updatedAt ? { updatedAt: record.updatedAt } : {}),
    ...(record.revokedAt ? { revokedAt: record.revokedAt } : {}),
    ...(bannedUntil ? { bannedUntil: iso(bannedUntil) } : {}),
  };
}

/** What creating a key answers: the key, shown this once, and the record as it is in force. */
export function createdKey(
  deps: Pick<GatewayDeps, 'plans'>,
  record: KeyRecord,
  key: string,
): Static<typeof CreatedKeySchema> {
  return {
    id: record.id,
    key,
    plan: record.plan,
    name: record.name,
    ...keyRules(deps, record),
    createdAt: record.createdAt,
    ...(record.expiresAt ? { expiresAt: record.expiresAt } : {}),
  };
}

/** What a key may do, in force: its limits over its plan's, its scopes, its allowed addresses. */
export function keyRules(
  deps: Pick<GatewayDeps, 'plans'>,
  record: KeyRecord,
): Pick<Static<typeof KeyViewSchema>, 'limits' | 'scopes' | 'allowedCidrs' | 'customerId' | 'credits' | 'ownCredits'> {
  // A key of a customer spends its customer's credits: its own terms (if any) are not in force,
  // so neither is shown (nor served to the customer's portal).
  const lone = !record.customerId;
  const credits = lone ? creditTermsIn(deps.plans, record.plan, record.credits) : undefined;
  return {
    limits: limitsFor(deps.plans, record.plan, record.limits),
    scopes: [...scopesFor(deps.plans, record.plan, record.scopes)],
    ...(record.allowedCidrs ? { allowedCidrs: record.allowedCidrs } : {}),
    ...(record.customerId ? { customerId: record.customerId } : {}),
    ...(credits ? { credits } : {}),
    // Absent (not null) when it follows its plan: null says it turned its plan's terms off.
    ...(lone && record.credits !== undefined ? { ownCredits: record.credits } : {}),
  };
}
