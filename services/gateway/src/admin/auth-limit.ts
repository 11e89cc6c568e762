import { ApiError } from '@animal-store/common/errors.js';
import type { onRequestAsyncHookHandler } from 'fastify';
import { BEARER_CHALLENGE, invalidTokenChallenge, parseBearer } from '../gate/bearer.js';
import { sameSecret } from '../keys/api-key.js';
import { addressKey } from '../limits/anonymous-limiter.js';
import type { AuthFailures } from '../limits/auth-failures.js';

const WRONG_TOKEN = invalidTokenChallenge('The admin token is not valid');
const UNAUTHORIZED = 'Send the admin token as "Authorization: Bearer <ADMIN_TOKEN>"';

/** Wrong tokens one address may send per window; the next ones are answered 429. */
const ADMIN_AUTH_FAILURES = 10;
const ADMIN_AUTH_WINDOW_MS = 60_000;

/**
 * The admin API's bearer check with a limit on guessing: after ADMIN_AUTH_FAILURES wrong tokens
 * from one address within a window (counted across replicas: limits/auth-failures.ts), each further
 * wrong one gets 429 admin_rate_limited with Retry-After until the window ends. The right token
 * is never refused for failures, as the public gate never refuses a valid key for its address's
 * guesses: the operator behind the same address (a shared NAT, a port-forward, a colleague's typo)
 * is not locked out by someone else's tries. Guessing the token itself is what its length (at
 * least 16 characters) prevents; the limit answers a guesser 429 and keeps the count in view.
 * Only a bearer token is a guess: a request without one (a health probe, a CLI with ADMIN_TOKEN
 * unset) gets its 401 and counts nothing.
 */
export function adminAuth(
  token: string,
  failures: AuthFailures,
  now: () => number = Date.now,
): onRequestAsyncHookHandler {
  return async (request) => {
    const given = parseBearer(request.headers.authorization);
    if (given === undefined) throw new ApiError(401, 'unauthorized', UNAUTHORIZED, BEARER_CHALLENGE);
    if (sameSecret(given, token)) return;
    const at = now();
    const { count, resetAt } = await failures.record(addressKey(request.ip), at, ADMIN_AUTH_WINDOW_MS);
    if (count > ADMIN_AUTH_FAILURES) {
      throw new ApiError(429, 'admin_rate_limited', 'Too many failed admin authentications from this address', {
        'retry-after': String(Math.max(1, Math.ceil((resetAt - at) / 1000))),
      });
    }
    throw new ApiError(401, 'unauthorized', UNAUTHORIZED, WRONG_TOKEN);
  };
}
