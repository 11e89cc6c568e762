import { ApiError } from '@animal-store/common/errors.js';
import { mongoFailure } from '@animal-store/common/mongo/errors.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { UNAVAILABLE_RETRY_SECONDS } from '../api/store-unavailable.js';
import type { KeyRefusal } from './authenticate.js';
import { BEARER_CHALLENGE, invalidTokenChallenge } from './bearer.js';
import type { KeylessCharge, KeylessReason } from './keyless.js';
import { setExhaustedAnonymousHeaders } from './rate-limit-headers.js';

const INVALID = invalidTokenChallenge('The API key is not valid');

type Done = (err?: Error) => void;

/**
 * Counts a request without a usable key against its address, then calls `done` with that
 * limit's 429 when the address is over it, else with nothing: the request goes on (the API
 * reference, a path nothing serves).
 */
export function chargeAddress(
  keyless: KeylessCharge,
  request: FastifyRequest,
  reply: FastifyReply,
  reason: KeylessReason,
  done: Done,
): void {
  keyless(request, reply, reason).then((limited) => done(limited ?? undefined), done);
}

/**
 * Refuses a request without a usable key; it counts against its address's limit first, so
 * `done` gets that limit's 429 when the address is over it, else the refusal's 401.
 */
export function refuseKeyless(
  keyless: KeylessCharge,
  request: FastifyRequest,
  reply: FastifyReply,
  { reason, error }: KeyRefusal,
  done: Done,
): void {
  keyless(request, reply, reason).then(
    (limited) => done(limited ?? (reason === 'missing' ? missingKey() : (error ?? invalidKey()))),
    done,
  );
}

function missingKey(): ApiError {
  return new ApiError(
    401,
    'missing_api_key',
    'Send your API key as "Authorization: Bearer <API_KEY>"',
    BEARER_CHALLENGE,
  );
}

function invalidKey(): ApiError {
  return new ApiError(401, 'invalid_api_key', 'The API key is not valid', INVALID);
}

/** An uncached lookup the key store did not answer within KEY_LOOKUP_TIMEOUT_MS. */
class KeyLookupTimeout extends Error {
  constructor(ms: number) {
    super(`the key store did not answer within ${ms} ms (KEY_LOOKUP_TIMEOUT_MS)`);
    this.name = 'KeyLookupTimeout';
  }
}

/**
 * A lookup as a request waits for it: at most `ms`, then KeyLookupTimeout. The lookup itself goes
 * on (concurrent requests for one key share it) and caches its answer when the store gives one.
 */
export function withinLookup<T>(lookup: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new KeyLookupTimeout(ms)), ms);
  });
  return Promise.race([lookup, late]).finally(() => clearTimeout(timer));
}

/**
 * The answer for a key the cache does not hold while the key store cannot be asked: 503, or 500
 * when MongoDB refuses the gateway's credentials or rights (no retry helps; the log says so).
 */
export function keyStoreUnavailable(
  request: FastifyRequest,
  reply: FastifyReply,
  err: unknown,
  anonymousPerMinute: number,
  at: number,
): ApiError {
  // The key's plan is unknown here: report the per-address limit as exhausted until the retry.
  setExhaustedAnonymousHeaders(reply, anonymousPerMinute, at, at + UNAVAILABLE_RETRY_SECONDS * 1000);
  const failure = mongoFailure(err);
  if (failure?.status === 500) {
    request.log.error({ err }, `key store: ${failure.reason}`);
    return new ApiError(500, 'internal_error', 'Internal server error');
  }
  request.log.error({ err }, failure ? `key store unavailable: ${failure.reason}` : 'key store unavailable');
  return new ApiError(503, 'upstream_unavailable', 'Cannot verify API keys right now; retry shortly', {
    'retry-after': String(UNAVAILABLE_RETRY_SECONDS),
  });
}
