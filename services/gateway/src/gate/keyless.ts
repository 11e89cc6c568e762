import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import './access-fields.js';
import type { AnonymousLimiter } from '../limits/anonymous-limiter.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import { setRateLimitHeaders } from './rate-limit-headers.js';

/**
 * Why a request counts against its address's limit instead of a key's; `reference` is the API
 * reference (/v1, /v1/openapi.json, /docs), counted there with or without a key.
 */
export type KeylessReason = 'missing' | 'malformed' | 'unknown' | 'expired' | 'bad_request' | 'reference';

export type KeylessCharge = (
  request: FastifyRequest,
  reply: FastifyReply,
  reason: KeylessReason,
) => Promise<ApiError | null>;

/**
 * Counts a request without a usable key against its address (ANON_PER_MINUTE) and sets that
 * limit's headers: the 429 when the address is over it, else null and the caller answers.
 * Requests malformed before any route (bad percent-encoding, two Host headers) count too, so
 * an address over its limit gets nothing for free by breaking its requests.
 */
export function keylessCharge(anonymous: AnonymousLimiter, metrics: GatewayMetrics, now: () => number): KeylessCharge {
  return async (request, reply, reason) => {
    const decision = await anonymous.consume(request.ip);
    setRateLimitHeaders(reply, [decision.window], now());
    metrics.anonymous.inc({ reason, decision: decision.allowed ? 'allowed' : 'limited' });
    request.limiterDecision = decision.allowed ? 'admitted' : 'limited';
    request.limiterSource = 'address';
    if (decision.allowed) return null;
    const retryAfter = Math.max(1, Math.ceil((decision.window.resetAt - now()) / 1000));
    return new ApiError(429, 'rate_limit_exceeded', 'Too many requests without a valid API key from this address', {
      'retry-after': String(retryAfter),
    });
  };
}
