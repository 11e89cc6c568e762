import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyReply } from 'fastify';
import { isWellFormedApiKey } from '../keys/api-key.js';
import type { ResolvedKey } from '../keys/key-resolver.js';
import { invalidTokenChallenge, parseBearer } from './bearer.js';
import type { KeylessReason } from './keyless.js';

/** Why a request has no usable key (the framework-error path adds 'bad_request'). */
type AuthFailure = Exclude<KeylessReason, 'bad_request' | 'reference'>;

/**
 * A request without a usable key: why (counted against its address under that reason), and the
 * 401 to give when its address's limit lets it through (default: by reason, see refuse.ts).
 */
export interface KeyRefusal {
  reason: AuthFailure;
  error?: ApiError;
}

const BEARER_SCHEME = /^Bearer( |$)/i;
const NO_BEARER = 'The API key needs the scheme in front of it: send "Authorization: Bearer <API_KEY>"';
const NO_BEARER_CHALLENGE = invalidTokenChallenge('Send the API key with the Bearer scheme');
const EXPIRED = invalidTokenChallenge('The API key has expired');
const REPLACED = invalidTokenChallenge('The API key was replaced by a newer one and its grace period has ended');

// Refusals without a 401 of their own are shared: they carry no per-request state.
export const MISSING: KeyRefusal = Object.freeze({ reason: 'missing' });
const MALFORMED: KeyRefusal = Object.freeze({ reason: 'malformed' });
export const UNKNOWN: KeyRefusal = Object.freeze({ reason: 'unknown' });

/**
 * The well-formed key an Authorization header presents, or why it presents none. Shape and
 * checksum first: garbage never reaches the key store or the key's limiter. The header must be
 * present and non-empty (the gate answers a missing one itself).
 */
export function presentedKey(header: string): string | KeyRefusal {
  const presented = parseBearer(header);
  if (presented !== undefined && isWellFormedApiKey(presented)) return presented;
  // A key sent without the Bearer scheme (`Authorization: ask_…`, `Token ask_…`): say how to send it.
  if (
    presented === undefined &&
    !BEARER_SCHEME.test(header) &&
    isWellFormedApiKey(header.trim().split(/ +/).at(-1) ?? '')
  ) {
    return { reason: 'malformed', error: new ApiError(401, 'invalid_api_key', NO_BEARER, NO_BEARER_CHALLENGE) };
  }
  return presented === undefined ? MISSING : MALFORMED;
}

/** Why a known key may not be used at `at`, or undefined when it may (unknown keys are UNKNOWN). */
export function unusableKey(resolved: ResolvedKey, at: number): KeyRefusal | undefined {
  // Checked per request, not when cached: a key expires at its moment on every replica.
  if (at >= resolved.endsAt) return { reason: 'expired', error: expiredError(resolved) };
  return undefined;
}

function expiredError({ endsAt, secret }: ResolvedKey): ApiError {
  const when = new Date(endsAt).toISOString();
  return new ApiError(
    401,
    'expired_api_key',
    secret === 'previous'
      ? `This API key was replaced by a newer one and stopped working at ${when}`
      : `This API key expired at ${when}`,
    secret === 'previous' ? REPLACED : EXPIRED,
  );
}

/**
 * A rotated-out secret still in its grace (a rotation, or a leak report that rotated the key):
 * its answers say so, so the client switches before it stops. `Deprecation` (RFC 9745) dates the
 * rotation, `Sunset` (RFC 8594) the end of the grace, `Link` names the key whose new secret
 * replaces this one (the same key id: a rotation keeps the id).
 */
export function deprecatedSecret(reply: FastifyReply, { record, endsAt }: ResolvedKey): void {
  const rotatedAt = Date.parse(record.updatedAt ?? record.createdAt);
  reply.header('deprecation', `@${Math.floor(rotatedAt / 1000)}`);
  if (Number.isFinite(endsAt)) reply.header('sunset', new Date(endsAt).toUTCString());
  reply.header('link', `<urn:animal-store:key:${record.id}>; rel="successor-version"`);
}
