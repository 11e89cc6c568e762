import type { FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyRequest {
    /** The limiter's answer for this request (admitted, limited, banned, unavailable), for the access line. */
    limiterDecision: string | undefined;
    /** Where it was taken: shared, memory, local-ban, fallback, or address (the per-IP limit). */
    limiterSource: string | undefined;
    /** When an admitted request was admitted (epoch ms): the hour its usage history counts it in. */
    admittedAt: number | undefined;
    /** Where the history's hours of the key start past the UTC hour (the policy's hourShiftMs). */
    admittedHourShiftMs: number;
    /** Whose credit balance an admitted request spent from (a customer, or a lone key); undefined when none. */
    creditOwner: string | undefined;
  }
}

/**
 * The gateway's part of the access line. The key id is not here: the gate binds it to the
 * request's logger, so every line of a keyed request names it.
 */
export function gatewayAccessFields(request: FastifyRequest): Record<string, unknown> {
  return { limiter: request.limiterDecision, limiterSource: request.limiterSource };
}
