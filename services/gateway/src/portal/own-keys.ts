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

/**
 * A key of the signed-in customer, live. Any other id (another customer's, a key of no customer,
 * a guess, a revoked key) is the same 404, so an answer never tells whether the id exists
 * elsewhere; one that exists and is another's also leaves an audit line.
 */
export async function ownKey(
  deps: Pick<GatewayDeps, 'keyStore'>,
  request: FastifyRequest,
  id: string,
): Promise<KeyRecord> {
  const customerId = signedIn(request);
  const record = await deps.keyStore.get(id);
  if (record?.customerId === customerId && !record.revokedAt) return record;
  if (record && record.customerId !== customerId) {
    request.log.warn(
      { audit: 'portal.refused', customerId, keyId: id, owner: record.customerId ?? null },
      `portal: ${customerId} asked for key ${id}, which is not its own`,
    );
  }
  throw new ApiError(404, 'not_found', `No key with id ${clipped(id)}`);
}

/**
 * The signed-in customer, when a body names a customer: its own id, or the 404 any other id gets
 * (with an audit line), as if no such customer existed.
 */
export function ownCustomer(request: FastifyRequest, named: string | undefined): string {
  const customerId = signedIn(request);
  if (named === undefined || named === customerId) return customerId;
  request.log.warn(
    { audit: 'portal.refused', customerId, otherCustomerId: named },
    `portal: ${customerId} named customer ${named}, which is not itself`,
  );
  throw new ApiError(404, 'not_found', `No customer with id ${clipped(named)}`);
}
