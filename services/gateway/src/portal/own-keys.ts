import { ApiError, clipped } from '@animal-store/common/errors.js';
import type { FastifyRequest } from 'fastify';
import type { CustomerRecord } from '../customers/customer-store.js';
import type { GatewayDeps } from '../deps.js';
import type { KeyRecord } from '../keys/key-store.js';

/** The signed-in customer of a portal API request (the session check has set it). */
export function signedIn(request: FastifyRequest): string {
  const session = request.portalSession;
  if (!session) throw new ApiError(401, 'unauthorized', 'Not signed in');
  return session.customerId;
}

/** The signed-in customer's record; one deleted while signed in ends what the session shows. */
export async function signedInCustomer(
  deps: Pick<GatewayDeps, 'customerStore'>,
  request: FastifyRequest,
): Promise<CustomerRecord> {
  const customer = await deps.customerStore.get(signedIn(request));
  if (!customer) throw new ApiError(401, 'unauthorized', 'Your account is gone; the session has ended');
  return customer;
}

/** Why an id was refused: what the operator reads in the audit line, never what the caller is told. */
type Refusal = 'unknown' | 'another-customer' | 'no-customer' | 'revoked' | 'not-itself';

/**
 * The one audit line of every refused id, whatever the reason: the customer as actor, the id it
 * tried and the route it tried it on, so an operator sees probing (a run of guesses leaves a run
 * of lines), not only swaps of ids that exist. Written to the request log as every audit line is
 * (no store write): the caller is signed in, and the listener's per-address limit bounds how many.
 */
function refused(
  request: FastifyRequest,
  customerId: string,
  tried: { keyId: string } | { otherCustomerId: string },
  reason: Refusal,
  owner?: string | null,
): void {
  request.log.warn(
    {
      audit: 'portal.refused',
      actor: { customerId },
      ...tried,
      route: `${request.method} ${request.routeOptions.url ?? request.url}`,
      reason,
      ...(owner !== undefined ? { owner } : {}),
    },
    `portal: ${customerId} was refused ${'keyId' in tried ? `key ${tried.keyId}` : `customer ${tried.otherCustomerId}`}`,
  );
}

/**
 * The customer's live keys: the store's, then those API_KEYS_FILE gives it, which the portal
 * shows and counts against maxKeys but never changes (the file says what they are).
 */
export async function liveKeysOf(
  deps: Pick<GatewayDeps, 'keyStore' | 'keyResolver'>,
  customerId: string,
): Promise<Array<{ record: KeyRecord; source: 'store' | 'file' }>> {
  const stored = await deps.keyStore.liveKeysOf(customerId);
  const filed = deps.keyResolver.fileRecords().filter((k) => k.customerId === customerId && !k.revokedAt);
  return [
    ...stored.map((record) => ({ record, source: 'store' as const })),
    ...filed.map((record) => ({ record, source: 'file' as const })),
  ];
}

/**
 * A key of the signed-in customer, live, from the store or API_KEYS_FILE. Any other id (another
 * customer's, a key of no customer, a guess, a revoked key) is the same 404 and the same audit line, so an answer never tells
 * whether the id exists elsewhere, and a guess is as visible to the operator as a swap.
 */
export async function ownKey(
  deps: Pick<GatewayDeps, 'keyStore' | 'keyResolver'>,
  request: FastifyRequest,
  id: string,
  /** What the caller is about to do to it (`rotate`): a key of API_KEYS_FILE is then 409, never changed. */
  change?: string,
): Promise<KeyRecord> {
  const customerId = signedIn(request);
  const filed = deps.keyResolver.fileRecord(id);
  if (filed?.customerId === customerId) {
    if (change === undefined) return filed;
    throw new ApiError(
      409,
      'conflict',
      `Key ${filed.id} is managed in a file by your provider: ask them to ${change} it (the portal cannot)`,
    );
  }
  const record = filed ?? (await deps.keyStore.get(id));
  if (record?.customerId === customerId && !record.revokedAt) return record;
  if (!record) refused(request, customerId, { keyId: id }, 'unknown');
  else if (record.customerId === customerId) refused(request, customerId, { keyId: id }, 'revoked');
  else if (record.customerId) refused(request, customerId, { keyId: id }, 'another-customer', record.customerId);
  else refused(request, customerId, { keyId: id }, 'no-customer', null);
  throw new ApiError(404, 'not_found', `No key with id ${clipped(id)}`);
}

/**
 * The signed-in customer, when a body or query names a customer: its own id, or the 404 any other
 * id gets (with the audit line), as if no such customer existed.
 */
export function ownCustomer(request: FastifyRequest, named: string | undefined): string {
  const customerId = signedIn(request);
  if (named === undefined || named === customerId) return customerId;
  refused(request, customerId, { otherCustomerId: named }, 'not-itself');
  throw new ApiError(404, 'not_found', `No customer with id ${clipped(named)}`);
}
