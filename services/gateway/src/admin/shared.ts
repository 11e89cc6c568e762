import { ApiError, clipped, ErrorSchema } from '@animal-store/common/errors.js';
import type { FastifyBaseLogger } from 'fastify';
import type { Static } from 'typebox';
import type { GatewayDeps } from '../deps.js';
import type { KeyRecord } from '../keys/key-store.js';
import { limitsFor, scopesFor } from '../plans/plans.js';
import type { Idempotency } from './idempotency.js';
import type { CreatedKeySchema, KeyViewSchema } from './schemas.js';

/** What the admin routes are given: the gateway's collaborators, built once in deps.ts. */
export interface AdminRouteOptions {
  deps: GatewayDeps;
  /** Runs the creates under their Idempotency-Key. */
  idempotency: Idempotency;
}

export type Source = 'store' | 'file';
type AdminAction = 'create' | 'update' | 'rotate' | 'revoke' | 'unban';

export const errors = { 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema, 503: ErrorSchema };
/** A route that takes an Idempotency-Key: also 422 for a key reused with another body. */
export const idempotentErrors = { ...errors, 422: ErrorSchema };

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** One audit line and one count per change; the line names fields, never a secret. */
export function audit(
  deps: GatewayDeps,
  log: FastifyBaseLogger,
  action: AdminAction,
  keyId: string,
  fields: Record<string, unknown> = {},
): void {
  deps.metrics.adminActions.inc({ action });
  log.info({ audit: action, keyId, ...fields }, `admin: ${action} ${keyId}`);
  // Every audited key change is also an event for the webhook endpoints subscribed to it.
  deps.webhooks.keyAction(action, keyId, fields);
}

/** A key by id, from API_KEYS_FILE first, then the store; 404 when neither has it. */
export async function findKey(deps: GatewayDeps, id: string): Promise<{ record: KeyRecord; source: Source }> {
  const fromFile = deps.keyResolver.fileRecord(id);
  if (fromFile) return { record: fromFile, source: 'file' };
  const record = await deps.keyStore.get(id);
  if (!record) throw new ApiError(404, 'not_found', `No key with id ${clipped(id)}`);
  return { record, source: 'store' };
}

/** What an operator sees of a key: never its hash, with its ban if the limiter can say. */
export async function keyView(
  deps: GatewayDeps,
  record: KeyRecord,
  source: Source,
): Promise<Static<typeof KeyViewSchema>> {
  let bannedUntil: number | null = null;
  try {
    bannedUntil = await deps.limiter.banEndsAt(record.id);
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
): Pick<Static<typeof KeyViewSchema>, 'limits' | 'scopes' | 'allowedCidrs' | 'customerId'> {
  return {
    limits: limitsFor(deps.plans, record.plan, record.limits),
    scopes: [...scopesFor(deps.plans, record.plan, record.scopes)],
    ...(record.allowedCidrs ? { allowedCidrs: record.allowedCidrs } : {}),
    ...(record.customerId ? { customerId: record.customerId } : {}),
  };
}
