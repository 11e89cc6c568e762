import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Counter } from 'prom-client';
import { BEARER_CHALLENGE, invalidTokenChallenge, parseBearer } from './bearer.js';
import type { GatewayDeps } from './deps.js';
import { hashApiKey, isWellFormedApiKey } from './keys/api-key.js';
import type { ResolvedKey } from './keys/key-resolver.js';
import type { KeyRecord } from './keys/key-store.js';
import './access-fields.js';
import type { GuardedDecision } from './limits/guarded-limiter.js';
import { setBannedHeaders, setExhaustedAnonymousHeaders, setRateLimitHeaders } from './limits/headers.js';
import { MINUTE_MS, windowsFor } from './limits/key-limiter.js';
import type { KeylessCharge, KeylessReason } from './limits/keyless.js';
import { type Limits, limitsFor } from './plans.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated key, set by the gate for every request it admits. */
    apiKey: KeyRecord | null;
  }
  interface FastifyContextConfig {
    /** Routes anyone may call without a key and without counting against a limit. */
    public?: boolean;
    /**
     * Routes anyone may call without a key, each request counted against its address's limit
     * whether it carries a key or not: the Authorization header is not read there.
     */
    addressLimited?: boolean;
  }
}

export type GateOptions = Pick<GatewayDeps, 'keyResolver' | 'limiter' | 'anonymous' | 'metrics' | 'now'> & {
  /** Counts keyless requests against their address; shared with the framework-error path. */
  keyless: KeylessCharge;
  /** The length of a ban (BAN_SECONDS), reported in RateLimit-Policy while a key is banned. */
  banSeconds: number;
};

/** Seconds a client is told to wait when the limiter is unavailable in closed mode. */
const UNAVAILABLE_RETRY_SECONDS = 5;
const BEARER_SCHEME = /^Bearer( |$)/i;
const NO_BEARER = 'The API key needs the scheme in front of it: send "Authorization: Bearer <API_KEY>"';
const INVALID = invalidTokenChallenge('The API key is not valid');
const NO_BEARER_CHALLENGE = invalidTokenChallenge('Send the API key with the Bearer scheme');
const EXPIRED = invalidTokenChallenge('The API key has expired');
const REPLACED = invalidTokenChallenge('The API key was replaced by a newer one and its grace period has ended');

/** fastify's request logger is a pino child, which can extend its own bindings. */
type RequestLogger = { setBindings?(bindings: Record<string, string>): void };

/** Why a request has no usable key (the framework-error path adds 'bad_request'). */
type AuthFailure = Exclude<KeylessReason, 'bad_request' | 'reference'>;

/**
 * The gate in front of every non-public route: authenticate the bearer key, then take the
 * rate-limit decision, and put the rate-limit headers on the reply whatever happens next.
 * Answers to keyed API requests are personal: never stored by a cache (Cache-Control: no-store).
 */
export const gate = fp(
  async (app: FastifyInstance, opts: GateOptions) => {
    const { keyResolver: keys, limiter, anonymous, keyless, metrics, now, banSeconds } = opts;
    app.decorateRequest('apiKey', null);
    app.decorateRequest('limiterDecision', undefined);
    app.decorateRequest('limiterSource', undefined);

    /**
     * Refuses a request without a usable key; it counts against its address's limit. `refusal`
     * is the 401 to give when that limit lets it through (default: invalid_api_key).
     */
    async function refuseAnonymous(
      request: FastifyRequest,
      reply: FastifyReply,
      reason: AuthFailure,
      refusal?: ApiError,
    ): Promise<never> {
      const limited = await keyless(request, reply, reason);
      if (limited) throw limited;
      if (reason === 'missing') {
        throw new ApiError(
          401,
          'missing_api_key',
          'Send your API key as "Authorization: Bearer <API_KEY>"',
          BEARER_CHALLENGE,
        );
      }
      throw refusal ?? new ApiError(401, 'invalid_api_key', 'The API key is not valid', INVALID);
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
      request: FastifyRequest,
      reply: FastifyReply,
      record: KeyRecord,
      limits: Limits,
      decision: GuardedDecision,
    ): ApiError | undefined {
      const at = now();
      decisionCounter(decision).inc();
      request.limiterDecision = decision.outcome;
      request.limiterSource = decision.source;
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
          if (decision.started) {
            metrics.bans.inc({ source: decision.source });
            // The key id is in the request logger's bindings.
            request.log.warn(
              { refusals: decision.started.refusals, banEndsAt: new Date(decision.banEndsAt).toISOString() },
              'API key banned for ignoring rate limits',
            );
          }
          setBannedHeaders(reply, decision.windows, at, decision.banEndsAt, banSeconds);
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
      setExhaustedAnonymousHeaders(reply, anonymous.perMinute, at, until);
      return new ApiError(503, 'upstream_unavailable', 'Cannot verify API keys right now; retry shortly', {
        'retry-after': String(UNAVAILABLE_RETRY_SECONDS),
      });
    }

    // Callback style with a synchronous path up to the limiter: this runs on every request, and
    // each await would cost a promise and a microtask.
    app.addHook('onRequest', (request, reply, done) => {
      const config = request.routeOptions.config;
      if (config.public) return done();
      if (config.addressLimited) {
        return void keyless(request, reply, 'reference').then((refusal) => done(refusal ?? undefined), done);
      }
      reply.header('cache-control', 'no-store');
      const header = request.headers.authorization;
      if (header === undefined || header === '') {
        // A path nothing serves is a 404 with or without a key (GET /metrics here is not the
        // metrics listener); it still counts against the address like any keyless request.
        if (request.is404)
          return void keyless(request, reply, 'missing').then((refusal) => done(refusal ?? undefined), done);
        return void refuseAnonymous(request, reply, 'missing').catch(done);
      }
      const presented = parseBearer(header);
      // Shape and checksum first: garbage never reaches the key store or the key's limiter.
      if (presented === undefined || !isWellFormedApiKey(presented)) {
        // A key sent without the Bearer scheme (`Authorization: ask_…`, `Token ask_…`): say how to send it.
        if (
          presented === undefined &&
          !BEARER_SCHEME.test(header) &&
          isWellFormedApiKey(header.trim().split(/ +/).at(-1) ?? '')
        ) {
          return void refuseAnonymous(
            request,
            reply,
            'malformed',
            new ApiError(401, 'invalid_api_key', NO_BEARER, NO_BEARER_CHALLENGE),
          ).catch(done);
        }
        return void refuseAnonymous(request, reply, presented === undefined ? 'missing' : 'malformed').catch(done);
      }
      const withKey = (resolved: ResolvedKey | null) => {
        if (resolved === null) return void refuseAnonymous(request, reply, 'unknown').catch(done);
        // Checked per request, not when cached: a key expires at its moment on every replica.
        if (now() >= resolved.endsAt) {
          return void refuseAnonymous(request, reply, 'expired', expiredError(resolved)).catch(done);
        }
        const record = resolved.record;
        request.apiKey = record;
        // Every later line for this request (refusals, upstream errors, completion) names the key.
        // The request's logger is already its own child: extending its bindings costs far less
        // than a second child per request.
        (request.log as RequestLogger).setBindings?.({ keyId: record.id });
        const limits = limitsFor(record.plan, record.limits);
        limiter
          .consume(record.id, limits)
          .then((decision) => done(decide(request, reply, record, limits, decision)), done);
      };
      const guarded = (resolved: ResolvedKey | null) => {
        try {
          withKey(resolved);
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
