import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PORTAL_ENTRY } from '../customers/portal-session-store.js';
import type { PortalAddressLimits } from '../limits/portal-address-limits.js';

/**
 * The onRequest hook refusing an address over a portal limit: 429 `rate_limit_exceeded` in the
 * Error shape, with Retry-After and the RateLimit fields naming the window that refused it.
 */
export function limitAddresses(limits: PortalAddressLimits) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    // The route the router matched, not the raw URL: `/portal/%65nter` is the same route.
    const signIn = request.routeOptions.url === PORTAL_ENTRY;
    const over = await limits.consume(request.ip, signIn);
    if (!over) return;
    const { window, msBeforeNext, first } = over;
    const seconds = Math.max(1, Math.ceil(msBeforeNext / 1000));
    reply.header('ratelimit-policy', `"${window.name}";q=${window.perMinute};w=60`);
    reply.header('ratelimit', `"${window.name}";r=0;t=${seconds}`);
    // One line per address and window, not per refusal: a flood must not become a log flood.
    if (first) {
      request.log.warn({ audit: 'portal.limited', window: window.name }, `portal: ${window.name} limit reached`);
    }
    const what = window.name === 'portal' ? 'requests' : 'sign-in attempts';
    throw new ApiError(429, 'rate_limit_exceeded', `Too many ${what} from this address; retry in ${seconds} s`, {
      'retry-after': String(seconds),
    });
  };
}
