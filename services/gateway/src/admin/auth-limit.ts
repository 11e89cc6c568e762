import { ApiError } from '@animal-store/common/errors.js';
import type { onRequestAsyncHookHandler } from 'fastify';
import { LRUCache } from 'lru-cache';
import { BEARER_CHALLENGE, invalidTokenChallenge, parseBearer } from '../gate/bearer.js';
import { sameSecret } from '../keys/api-key.js';
import { addressKey } from '../limits/anonymous-limiter.js';

const WRONG_TOKEN = invalidTokenChallenge('The admin token is not valid');
const UNAUTHORIZED = 'Send the admin token as "Authorization: Bearer <ADMIN_TOKEN>"';

/** Failed authentications one address may make per window before it is refused outright. */
const ADMIN_AUTH_FAILURES = 10;
const ADMIN_AUTH_WINDOW_MS = 60_000;

interface Failures {
  count: number;
  /** When this address's window ends (epoch ms); it starts at its first failure. */
  resetAt: number;
}

/**
 * The admin API's bearer check with a limit on guessing: after ADMIN_AUTH_FAILURES wrong tokens
 * from one address within a window, that address gets 429 admin_rate_limited with Retry-After
 * until the window ends, and its token is not even compared. Only a bearer token that could have
 * been the right one is a guess: a request without one (a health probe, a scanner, a CLI with
 * ADMIN_TOKEN unset) gets its 401 but cannot lock out the operator behind the same address. Per
 * replica, in memory: the admin listener is an operator's loopback or port-forward, not shared
 * traffic.
 */
export function adminAuth(token: string, now: () => number = Date.now): onRequestAsyncHookHandler {
  // Bounded: a flood from many addresses forgets the oldest, never grows without end.
  const failures = new LRUCache<string, Failures>({ max: 10_000 });

  function blockedForMs(address: string, at: number): number {
    const seen = failures.get(address);
    if (!seen || seen.resetAt <= at || seen.count < ADMIN_AUTH_FAILURES) return 0;
    return seen.resetAt - at;
  }

  function recordFailure(address: string, at: number): void {
    const seen = failures.get(address);
    if (!seen || seen.resetAt <= at) failures.set(address, { count: 1, resetAt: at + ADMIN_AUTH_WINDOW_MS });
    else seen.count++;
  }

  return async (request) => {
    const at = now();
    const address = addressKey(request.ip);
    const waitMs = blockedForMs(address, at);
    if (waitMs > 0) {
      throw new ApiError(429, 'admin_rate_limited', 'Too many failed admin authentications from this address', {
        'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))),
      });
    }
    const given = parseBearer(request.headers.authorization);
    if (given === undefined) throw new ApiError(401, 'unauthorized', UNAUTHORIZED, BEARER_CHALLENGE);
    if (!sameSecret(given, token)) {
      recordFailure(address, at);
      throw new ApiError(401, 'unauthorized', UNAUTHORIZED, WRONG_TOKEN);
    }
  };
}
