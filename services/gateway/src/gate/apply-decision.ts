import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Counter } from 'prom-client';
import './access-fields.js';
import { UNAVAILABLE_RETRY_SECONDS } from '../api/store-unavailable.js';
import type { KeyRecord } from '../keys/key-store.js';
import type { GuardedDecision } from '../limits/guarded-limiter.js';
import { emptyWindows } from '../limits/key-limiter.js';
import { type LimitPolicy, ruleEnd, type WindowRule } from '../limits/policy.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { Webhooks } from '../webhooks/webhooks.js';
import { setBannedHeaders, setRateLimitHeaders } from './rate-limit-headers.js';

export interface DecisionOptions {
  metrics: GatewayMetrics;
  now: () => number;
  /** The length of a ban (BAN_SECONDS), reported in RateLimit-Policy while a key is banned. */
  banSeconds: number;
  /** Told of admitted requests (quota thresholds) and of bans as they start. */
  webhooks: Pick<Webhooks, 'onAdmitted' | 'onBanned' | 'onCredits'>;
}

/**
 * Applies a key limiter's decision to the request: counted, recorded for the access line, its
 * rate-limit headers set. Returns the refusal (429, 503), or undefined when the request may go on.
 * A policy in shadow mode refuses nothing for limits or bans: such a request goes on, counted and
 * logged as `shadow_refused`, its headers as true as ever. `forbidden` (a scope or address the key
 * lacks) was decided at no cost: its headers are set and it is the answer.
 */
export type ApplyDecision = (
  request: FastifyRequest,
  reply: FastifyReply,
  record: KeyRecord,
  policy: LimitPolicy,
  decision: GuardedDecision,
  forbidden: ApiError | undefined,
) => ApiError | undefined;

/**
 * How a window reads in a refusal: what it allows, and over what; a customer's window says it is
 * the quota all the customer's keys share (`customer-minute` in RateLimit-Policy).
 */
function windowText(rule: WindowRule, customerId: string | undefined): string {
  let text: string;
  if (rule.kind === 'calendar') {
    text = `the ${rule.name} quota (${rule.limit} per ${rule.calendar.period(rule.name)})`;
  } else if (rule.kind === 'sliding') text = `the sliding ${rule.name} window (${rule.limit} in any ${rule.name})`;
  else text = `the ${rule.name} window (${rule.limit} per ${rule.name})`;
  if (rule.scope !== 'customer') return text;
  return `customer ${customerId ?? ''}'s shared quota, "customer-${rule.name}": ${text.slice(4)}, shared by all its keys,`;
}

/**
 * A 429's message: the window that refused and when it lets the request through, so a client told
 * to wait 385,572 s learns that its month is spent, not that something is broken.
 */
function limitedMessage(
  record: KeyRecord,
  decision: Extract<GuardedDecision, { outcome: 'limited' }>,
  cost: number,
  at: number,
): string {
  const rule = decision.refusedBy;
  const remaining = decision.windows.find((w) => w.name === rule.name && w.scope === rule.scope)?.remaining ?? 0;
  // The window's own time, not the Retry-After, which the ban policy may make longer; a calendar
  // window's is its period's end, to the millisecond (the decision's clock read may differ by one).
  const resetsAt = rule.kind === 'calendar' && cost <= rule.limit ? ruleEnd(rule, at) : at + decision.roomInMs;
  const retryAt = new Date(resetsAt).toISOString();
  let state: string;
  if (cost > rule.limit) state = `is smaller than this request's cost of ${cost}`;
  else if (remaining === 0) state = 'is used up';
  else state = `has ${remaining} left and this request costs ${cost}`;
  // "on"/"from", not "at": "at <time>:<n>:<n>" is what a leaked stack frame looks like to the
  // checks that guard every error body against one.
  const when = rule.kind === 'sliding' ? `it has room again from ${retryAt}` : `it resets on ${retryAt}`;
  return `Rate limit exceeded for the ${record.plan} plan: ${windowText(rule, record.customerId)} ${state}; ${when}`;
}

/**
 * A 402: the credit balance cannot cover the request (the windows could). Payment Required, not
 * 429: waiting does not help unless a refill is due (then, and only then, Retry-After says when),
 * a top-up does; clients that retry 429s by themselves should not loop on it.
 */
function creditsExhausted(
  record: KeyRecord,
  decision: Extract<GuardedDecision, { outcome: 'exhausted' }>,
  cost: number,
  at: number,
): ApiError {
  const owner = record.customerId === undefined ? `key ${record.id}` : `customer ${record.customerId}`;
  const refill =
    decision.retryAfterMs === null
      ? 'no refill covering it is due: top up the balance'
      : `it is refilled on ${new Date(at + decision.retryAfterMs).toISOString()}`;
  return new ApiError(
    402,
    'credits_exhausted',
    `Out of credits: ${owner} has ${decision.balance} left and this request costs ${cost}; ${refill}`,
    decision.retryAfterMs === null ? undefined : { 'retry-after': String(Math.ceil(decision.retryAfterMs / 1000)) },
  );
}

export function limiterDecisions({ metrics, now, banSeconds, webhooks }: DecisionOptions): ApplyDecision {
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

  const shadowCounters = new Map<string, Counter.Internal>();
  function shadowCounter(source: string): Counter.Internal {
    let child = shadowCounters.get(source);
    if (!child) {
      child = metrics.decisions.labels({ decision: 'shadow_refused', source });
      shadowCounters.set(source, child);
    }
    return child;
  }

  return (request, reply, record, policy, decision, forbidden) => {
    const at = now();
    request.limiterSource = decision.source;
    if (decision.outcome !== 'unavailable' && decision.credits) {
      webhooks.onCredits(record, decision.credits, policy.credits?.refill?.amount ?? null);
    }
    if (forbidden !== undefined) {
      request.limiterDecision = 'forbidden';
      if (decision.outcome === 'banned') setBannedHeaders(reply, decision.windows, at, decision.banEndsAt, banSeconds);
      else if (decision.outcome === 'unavailable') {
        setRateLimitHeaders(reply, emptyWindows(policy, at), at, at + UNAVAILABLE_RETRY_SECONDS * 1000);
      } else setRateLimitHeaders(reply, decision.windows, at);
      return forbidden;
    }
    const refused = decision.outcome === 'limited' || decision.outcome === 'banned' || decision.outcome === 'exhausted';
    if (policy.shadow && refused) {
      shadowCounter(decision.source).inc();
      request.limiterDecision = 'shadow_refused';
      if (decision.outcome === 'banned') setBannedHeaders(reply, decision.windows, at, decision.banEndsAt, banSeconds);
      else setRateLimitHeaders(reply, decision.windows, at);
      return undefined;
    }
    decisionCounter(decision).inc();
    request.limiterDecision = decision.outcome;
    switch (decision.outcome) {
      case 'admitted':
        request.admittedAt = at;
        request.admittedHourShiftMs = policy.hourShiftMs;
        // The limiter spent the cost from this balance: the proxy gives it back if pets fails.
        if (policy.credits) request.creditOwner = record.customerId ?? record.id;
        setRateLimitHeaders(reply, decision.windows, at);
        // The gate charged the route's cost (forbidden requests, at cost 0, returned above).
        webhooks.onAdmitted(record, decision.windows, request.routeOptions.config.cost ?? 1);
        return undefined;
      case 'limited':
        setRateLimitHeaders(reply, decision.windows, at);
        return new ApiError(
          429,
          'rate_limit_exceeded',
          limitedMessage(record, decision, request.routeOptions.config.cost ?? 1, at),
          { 'retry-after': String(Math.ceil(decision.retryAfterMs / 1000)) },
        );
      case 'exhausted':
        setRateLimitHeaders(reply, decision.windows, at);
        return creditsExhausted(record, decision, request.routeOptions.config.cost ?? 1, at);
      case 'banned':
        if (decision.started) {
          metrics.bans.inc({ source: decision.source });
          // The key id is in the request logger's bindings.
          request.log.warn(
            { refusals: decision.started.refusals, banEndsAt: new Date(decision.banEndsAt).toISOString() },
            'API key banned for ignoring rate limits',
          );
          webhooks.onBanned(record, decision.banEndsAt);
        }
        setBannedHeaders(reply, decision.windows, at, decision.banEndsAt, banSeconds);
        return new ApiError(429, 'api_key_banned', 'This API key is temporarily banned for ignoring rate limits', {
          'retry-after': String(Math.max(1, Math.ceil((decision.banEndsAt - at) / 1000))),
        });
      case 'unavailable':
        setRateLimitHeaders(reply, emptyWindows(policy, at), at, at + UNAVAILABLE_RETRY_SECONDS * 1000);
        return new ApiError(503, 'rate_limiter_unavailable', 'Rate limiting is unavailable; retry shortly', {
          'retry-after': String(UNAVAILABLE_RETRY_SECONDS),
        });
    }
  };
}
