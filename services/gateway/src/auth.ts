import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Counter } from 'prom-client';
import { hashApiKey, isWellFormedApiKey } from './keys/api-key.js';
import type { KeyResolver } from './keys/key-resolver.js';
import type { KeyRecord } from './keys/key-store.js';
import type { AnonymousLimiter } from './limits/anonymous-limiter.js';
import { MINUTE_MS, type WindowState, windowsFor } from './limits/decision.js';
import type { GuardedDecision, GuardedLimiter } from './limits/guarded-limiter.js';
import { setRateLimitHeaders } from './limits/headers.js';
import type { GatewayMetrics } from './metrics.js';
import { type Limits, limitsFor } from './plans.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated key, set by the gate for every request it admits. */
    apiKey: KeyRecord | null;
  }
  interface FastifyContextConfig {
    /** Routes anyone may call without a key and without counting against a limit. */
    public?: boolean;
  }
}

export interface GateOptions {
  keys: KeyResolver;
  limiter: GuardedLimiter;
  anonymous: AnonymousLimiter;
  metrics: GatewayMetrics;
  now: () => number;
}

/** Seconds a client is told to wait when the limiter is unavailable in closed mode. */
const UNAVAILABLE_RETRY_SECONDS = 5;
const BEARER = /^Bearer +(\S+) *$/i;

/** fastify's request logger is a pino child, which can extend its own bindings. */
type RequestLogger = { setBindings?(bindings: Record<string, string>): void };

type AuthFailure = 'missing' | 'malformed' | 'unknown';

/**
 * The gate in front of every non-public route: authenticate the bearer key, then take the
 * rate-limit decision, and put the rate-limit headers on the reply whatever happens next.
 */
export const gate = fp(
  async (app: FastifyInstance, opts: GateOptions) => {
    const { keys, limiter, anonymous, metrics, now } = opts;
    app.decorateRequest('apiKey', null);

    async function refuseAnonymous(request: FastifyRequest, reply: FastifyReply, reason: AuthFailure): Promise<never> {
      const decision = await anonymous.consume(request.ip);
      setRateLimitHeaders(reply, [decision.window], now());
      metrics.anonymous.inc({ reason, decision: decision.allowed ? 'allowed' : 'limited' });
      if (!decision.allowed) {
        const retryAfter = Math.max(1, Math.ceil((decision.window.resetAt - now()) / 1000));
        throw new ApiError(429, 'rate_limit_exceeded', 'Too many requests without a valid API key from this address', {
          'retry-after': String(retryAfter),
        });
      }
      if (reason === 'missing') {
        throw new ApiError(401, 'missing_api_key', 'Send your API key as "Authorization: Bearer <API_KEY>"');
      }
      throw new ApiError(401, 'invalid_api_key', 'The API key is not valid');
    }

    // One counter child per outcome and source, found without hashing labels on every request.
    const decisionCounters = new Map<string, Counter.Internal>();
    function decisionCounter(decision: GuardedDecision): Counter.Internal {
      const id = `${decision.outcome}/${decision.source}`;
      let child = decisionCounters.get(id);
      if (!child) {
        child = metrics.decisions.labels({ decision: decision.outcome, source: decision.source });
        decisionCounters.set(id, child);
      }
      return child;
    }

    /** The refusal (429, 503) for a limiter decision, or undefined when the request may go on. */
    function decide(
      reply: FastifyReply,
      record: KeyRecord,
      limits: Limits,
      decision: GuardedDecision,
    ): ApiError | undefined {
      const at = now();
      decisionCounter(decision).inc();
      switch (decision.outcome) {
        case 'admitted':
          setRateLimitHeaders(reply, decision.windows, at);
          return undefined;
        case 'limited':
          setRateLimitHeaders(reply, decision.windows, at);
          return new ApiError(429, 'rate_limit_exceeded', `Rate limit exceeded for the ${record.plan} plan`, {
            'retry-after': String(Math.ceil(decision.retryAfterMs / 1000)),
          });
        case 'banned':
          setRateLimitHeaders(reply, decision.windows, at, decision.banEndsAt);
          return new ApiError(429, 'api_key_banned', 'This API key is temporarily banned for ignoring rate limits', {
            'retry-after': String(Math.max(1, Math.ceil((decision.banEndsAt - at) / 1000))),
          });
        case 'unavailable':
          setRateLimitHeaders(
            reply,
            windowsFor(limits, 0, MINUTE_MS, 0, 0, at),
            at,
            at + UNAVAILABLE_RETRY_SECONDS * 1000,
          );
          return new ApiError(503, 'rate_limiter_unavailable', 'Rate limiting is unavailable; retry shortly', {
            'retry-after': String(UNAVAILABLE_RETRY_SECONDS),
          });
      }
    }

    function keyStoreUnavailable(request: FastifyRequest, reply: FastifyReply, err: unknown): ApiError {
      request.log.error({ err }, 'key store unavailable');
      const at = now();
      const until = at + UNAVAILABLE_RETRY_SECONDS * 1000;
      // The key's plan is unknown here: report the per-address limit as exhausted until the retry.
      setRateLimitHeaders(reply, [anonymousWindow(until)], at, until);
      return new ApiError(503, 'upstream_unavailable', 'Cannot verify API keys right now; retry shortly', {
        'retry-after': String(UNAVAILABLE_RETRY_SECONDS),
      });
    }

    function anonymousWindow(resetAt: number): WindowState {
      return { name: 'anonymous', limit: anonymous.perMinute, remaining: 0, windowSeconds: 60, resetAt };
    }

    // Callback style with a synchronous path up to the limiter: this runs on every request, and
    // each await would cost a promise and a microtask.
    app.addHook('onRequest', (request, reply, done) => {
      if (request.routeOptions.config.public) return done();
      const header = request.headers.authorization;
      if (header === undefined || header === '') return void refuseAnonymous(request, reply, 'missing').catch(done);
      const match = BEARER.exec(header);
      const presented = match?.[1];
      // Shape and checksum first: garbage never reaches the key store or the key's limiter.
      if (presented === undefined || !isWellFormedApiKey(presented)) {
        return void refuseAnonymous(request, reply, match ? 'malformed' : 'missing').catch(done);
      }
      const withRecord = (record: KeyRecord | null) => {
        if (record === null) return void refuseAnonymous(request, reply, 'unknown').catch(done);
        request.apiKey = record;
        // Every later line for this request (refusals, upstream errors, completion) names the key.
        // The request's logger is already its own child: extending its bindings costs far less
        // than a second child per request.
        (request.log as RequestLogger).setBindings?.({ keyId: record.id });
        const limits = limitsFor(record.plan, record.limits);
        limiter.consume(record.id, limits).then((decision) => done(decide(reply, record, limits, decision)), done);
      };
      const guarded = (record: KeyRecord | null) => {
        try {
          withRecord(record);
        } catch (err) {
          // A record the code cannot use (say, an enterprise key stored without limits) fails
          // this request, not the process.
          done(err as Error);
        }
      };
      const sha256 = hashApiKey(presented);
      const cached = keys.cached(sha256);
      if (cached !== undefined) return guarded(cached);
      // An address already over its limit gets no store lookups: random well-formed keys cost
      // the key store nothing once their sender is refused.
      if (anonymous.isRefused(request.ip)) return void refuseAnonymous(request, reply, 'unknown').catch(done);
      keys.fetch(sha256).then(guarded, (err) => done(keyStoreUnavailable(request, reply, err)));
    });
  },
  { name: 'gate' },
);
