/**
 * The gate in front of every non-public route, as thin glue over three steps:
 *   gate/authenticate.ts    the bearer key: well-formed, known, not expired (or a KeyRefusal)
 *   gate/apply-decision.ts  the key limiter's decision: headers, counters, the 429/503 refusal
 *   gate/refuse.ts          refusals without a usable key (charged to the address) or key store
 *
 *   gate/authorize.ts     the key's scopes and allowed addresses against the route and client
 *
 * A route's scope and cost come from its config (set where the proxy registers it); a request
 * its key may not make asks the limiter at cost 0, so its 403 carries true rate-limit headers
 * and takes nothing.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { CustomerRecord } from '../customers/customer-store.js';
import type { GatewayDeps } from '../deps.js';
import { hashApiKey } from '../keys/api-key.js';
import type { ResolvedKey } from '../keys/key-resolver.js';
import type { KeyRecord } from '../keys/key-store.js';
import './access-fields.js';
import type { LimitPolicy } from '../limits/policy.js';
import { markStage } from '../observability/server-timing.js';
import { type PlanBook, policyForKey, type Scope, sameCustomerTerms } from '../plans/plans.js';
import type { UsageReadLimit } from '../self-service/usage-reads.js';
import { limiterDecisions } from './apply-decision.js';
import { deprecatedSecret, MISSING, presentedKey, UNKNOWN, unusableKey } from './authenticate.js';
import { forbidden } from './authorize.js';
import type { KeylessCharge } from './keyless.js';
import { chargeAddress, keyStoreUnavailable, refuseKeyless, withinLookup } from './refuse.js';

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
    /** The scope a key needs here (pets:read, pets:write). */
    scope?: Scope;
    /** Units a request here takes from each of its key's windows (PLANS_FILE routeCosts; 1). */
    cost?: number;
    /** A proxied route's name as routeCosts and the metering export give it (`GET /v1/pets`). */
    route?: string;
    /**
     * About the key itself (GET /v1/usage): authenticated and held to the key's allowed addresses,
     * but never counted against its windows or toward a ban; the route's own limit applies instead.
     */
    selfService?: boolean;
  }
}

export type GateOptions = Pick<
  GatewayDeps,
  'keyResolver' | 'customerResolver' | 'limiter' | 'anonymous' | 'metrics' | 'now' | 'webhooks'
> & {
  /** Counts keyless requests against their address; shared with the framework-error path. */
  keyless: KeylessCharge;
  /** The length of a ban (BAN_SECONDS), reported in RateLimit-Policy while a key is banned. */
  banSeconds: number;
  plans: PlanBook;
  /** The selfService routes' own limit per key. */
  usageReads: UsageReadLimit;
  /** KEY_LOOKUP_TIMEOUT_MS: the longest a request waits for an uncached key or customer. */
  keyLookupTimeoutMs: number;
};

/**
 * The policy of a key, with its customer's terms. Records are cached and replaced (never
 * changed) when a key or customer changes: one policy per key record, made again when the key's
 * customer record is another with other terms. A customer fetched again unchanged (it fell out of
 * a full cache, or its TTL ran out) is another record with the same terms: it keeps the policy.
 */
function policiesOf(plans: PlanBook): (record: KeyRecord, customer: CustomerRecord | null) => LimitPolicy {
  const policies = new WeakMap<KeyRecord, { customer: CustomerRecord | null; policy: LimitPolicy }>();
  return (record, customer) => {
    const held = policies.get(record);
    if (held && sameCustomer(held.customer, customer)) {
      held.customer = customer;
      return held.policy;
    }
    // A key whose customer is gone (deleted: its keys are being revoked) keeps its own plan.
    const policy = policyForKey(plans, record, customer);
    policies.set(record, { customer, policy });
    return policy;
  };
}

/** The same customer record, or one of the same customer with the same terms. */
function sameCustomer(held: CustomerRecord | null, customer: CustomerRecord | null): boolean {
  if (held === customer) return true;
  return held !== null && customer !== null && held.id === customer.id && sameCustomerTerms(held, customer);
}

/**
 * A request about the key itself: held to the key's allowed addresses, then to the route's own
 * limit; the key's windows are not asked, so it takes nothing from them and counts toward no ban.
 */
function selfService(
  usageReads: UsageReadLimit,
  plans: PlanBook,
  ip: string,
  record: KeyRecord,
  done: (err?: Error) => void,
): void {
  const denied = forbidden(record, undefined, ip, plans);
  if (denied !== undefined) {
    done(denied);
    return;
  }
  usageReads.take(record.id).then((refusal) => done(refusal), done);
}

/** What the gate sets on every request, declared up front so every request has the same shape. */
function decorateRequests(app: FastifyInstance): void {
  app.decorateRequest('apiKey', null);
  app.decorateRequest('limiterDecision', undefined);
  app.decorateRequest('limiterSource', undefined);
  app.decorateRequest('admittedAt', undefined);
  app.decorateRequest('admittedHourShiftMs', 0);
  app.decorateRequest('creditOwner', undefined);
}

/** fastify's request logger is a pino child, which can extend its own bindings. */
type RequestLogger = { setBindings?(bindings: Record<string, string>): void };

/**
 * Authenticates the bearer key, then takes the rate-limit decision, and puts the rate-limit
 * headers on the reply whatever happens next. Answers to keyed API requests are personal: never
 * stored by a cache (Cache-Control: no-store).
 */
export const gate = fp(
  async (app: FastifyInstance, opts: GateOptions) => {
    const { keyResolver, customerResolver, limiter, anonymous, keyless, now, plans, usageReads, keyLookupTimeoutMs } =
      opts;
    const applyDecision = limiterDecisions(opts);
    const policyOf = policiesOf(plans);
    decorateRequests(app);

    // Callback style with a synchronous path up to the limiter: this runs on every request, and
    // each await would cost a promise and a microtask.
    app.addHook('onRequest', (request, reply, done) => {
      const config = request.routeOptions.config;
      if (config.public) return done();
      if (config.addressLimited) {
        return chargeAddress(keyless, request, reply, 'reference', done);
      }
      reply.header('cache-control', 'no-store');
      const header = request.headers.authorization;
      if (header === undefined || header === '') {
        // A path nothing serves is a 404 with or without a key (GET /metrics here is not the
        // metrics listener); it still counts against the address like any keyless request.
        if (request.is404) return chargeAddress(keyless, request, reply, 'missing', done);
        return refuseKeyless(keyless, request, reply, MISSING, done);
      }
      const presented = presentedKey(header);
      if (typeof presented !== 'string') return refuseKeyless(keyless, request, reply, presented, done);
      const withKey = (resolved: ResolvedKey | null) => {
        if (resolved === null) return refuseKeyless(keyless, request, reply, UNKNOWN, done);
        const refusal = unusableKey(resolved, now());
        if (refusal !== undefined) return refuseKeyless(keyless, request, reply, refusal, done);
        const record = resolved.record;
        request.apiKey = record;
        if (resolved.secret === 'previous') deprecatedSecret(reply, resolved);
        // Every later line for this request (refusals, upstream errors, completion) names the key.
        // The request's logger is already its own child: extending its bindings costs far less
        // than a second child per request.
        (request.log as RequestLogger).setBindings?.({ keyId: record.id });
        const customerId = record.customerId;
        if (customerId === undefined) return decide(record, null);
        const customer = customerResolver.cached(customerId);
        if (customer !== undefined) return decide(record, customer);
        // Not cached: one store call (shared by concurrent requests), answered as a key lookup is.
        withinLookup(customerResolver.fetch(customerId), keyLookupTimeoutMs).then(
          (fetched) => {
            try {
              decide(record, fetched);
            } catch (err) {
              done(err as Error);
            }
          },
          (err) => done(keyStoreUnavailable(request, reply, err, anonymous.perMinute, now())),
        );
      };
      const decide = (record: KeyRecord, customer: CustomerRecord | null) => {
        if (config.selfService) return selfService(usageReads, plans, request.ip, record, done);
        const policy = policyOf(record, customer);
        const denied = forbidden(record, config.scope, request.ip, plans);
        markStage(request, 'limiter');
        limiter
          .consume(record.id, policy, denied === undefined ? (config.cost ?? 1) : 0, record.customerId)
          .then((decision) => {
            markStage(request, 'decided');
            done(applyDecision(request, reply, record, policy, decision, denied));
          }, done);
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
      const cached = keyResolver.cached(sha256);
      if (cached !== undefined) return guarded(cached);
      // Looked up even from an address over its per-address limit: that limit is for requests
      // without a valid key, and only the store can tell a valid key (one nobody has used yet,
      // from an address others flooded) from a guess. Garbage never gets here (shape and
      // checksum), a repeat is answered by the cache of unknown keys, and a guess is still
      // counted against its address and refused.
      // Bounded: MongoDB's server selection waits out an election (15 s), the request does not.
      withinLookup(keyResolver.fetch(sha256), keyLookupTimeoutMs).then(guarded, (err) =>
        done(keyStoreUnavailable(request, reply, err, anonymous.perMinute, now())),
      );
    });
  },
  { name: 'gate' },
);
