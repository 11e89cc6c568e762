import type { FastifyReply } from 'fastify';
import type { WindowState } from '../limits/key-limiter.js';
import { WINDOW_NAMES } from '../limits/policy.js';

/**
 * The rate-limit fields every gateway answer carries, as the API description and CORS name them;
 * replies set them in lower case.
 */
export const RATE_LIMIT_HEADER_NAMES = [
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'RateLimit',
  'RateLimit-Policy',
] as const;
const [LIMIT, REMAINING, RESET, STATE, POLICY] = RATE_LIMIT_HEADER_NAMES.map((name) => name.toLowerCase()) as [
  string,
  string,
  string,
  string,
  string,
];

/** Customers' windows as the headers name them (`customer-minute`), made once. */
const CUSTOMER_LABELS = new Map<string, string>(WINDOW_NAMES.map((name) => [name, `customer-${name}`]));

/**
 * A window's name in RateLimit and RateLimit-Policy: its own, or for a window a key shares with
 * the other keys of its customer, `customer-<name>`, so a client sees which one binds.
 */
function windowLabel(w: Pick<WindowState, 'name' | 'scope'>): string {
  return w.scope === 'customer' ? (CUSTOMER_LABELS.get(w.name) ?? w.name) : w.name;
}

/** The window a client should watch: fewest remaining, and on a tie the one that resets later. */
function bindingWindow(windows: readonly WindowState[]): WindowState {
  let binding = windows[0] as WindowState;
  for (const w of windows) {
    if (w.remaining < binding.remaining || (w.remaining === binding.remaining && w.resetAt > binding.resetAt)) {
      binding = w;
    }
  }
  return binding;
}

const policyCache = new Map<string, string>();

/** `"minute";q=60;w=60, "day";q=1000;w=86400`; a handful of distinct plans, so built once each. */
function policyHeader(windows: readonly WindowState[]): string {
  let cacheKey = '';
  for (const w of windows) cacheKey += `${windowLabel(w)}:${w.limit}:${w.windowSeconds},`;
  let policy = policyCache.get(cacheKey);
  if (policy === undefined) {
    policy = windows.map((w) => `"${windowLabel(w)}";q=${w.limit};w=${w.windowSeconds}`).join(', ');
    if (policyCache.size < 10_000) policyCache.set(cacheKey, policy);
  }
  return policy;
}

function secondsUntil(at: number, now: number): number {
  return Math.max(0, Math.ceil((at - now) / 1000));
}

/**
 * Sets X-RateLimit-* for the binding window and the IETF RateLimit / RateLimit-Policy fields
 * for every window. `until` overrides every window as exhausted until that moment (the limiter
 * being unavailable, or no key known).
 */
export function setRateLimitHeaders(
  reply: FastifyReply,
  windows: readonly WindowState[],
  now: number,
  until?: number,
): void {
  const binding = bindingWindow(windows);
  const remaining = until === undefined ? binding.remaining : 0;
  const resetAt = until ?? binding.resetAt;
  let state = '';
  for (const w of windows) {
    if (state) state += ', ';
    state +=
      until === undefined
        ? `"${windowLabel(w)}";r=${w.remaining};t=${secondsUntil(w.resetAt, now)}`
        : `"${windowLabel(w)}";r=0;t=${secondsUntil(until, now)}`;
  }
  reply.header(LIMIT, binding.limit);
  reply.header(REMAINING, remaining);
  reply.header(RESET, Math.ceil(resetAt / 1000));
  reply.header(POLICY, policyHeader(windows));
  reply.header(STATE, state);
}

/**
 * Headers for a banned key: X-RateLimit-* say nothing may be sent until the ban ends, and the
 * IETF fields report every window as it truly stands plus the ban as an item of its own
 * (`"ban";r=0;t=<seconds left>`, policy `"ban";q=0;w=<ban length>`), so a client that reads them
 * sees it is banned, not that its day quota is gone.
 */
export function setBannedHeaders(
  reply: FastifyReply,
  windows: readonly WindowState[],
  now: number,
  banEndsAt: number,
  banSeconds: number,
): void {
  const binding = bindingWindow(windows);
  let state = '';
  for (const w of windows) state += `"${windowLabel(w)}";r=${w.remaining};t=${secondsUntil(w.resetAt, now)}, `;
  reply.header(LIMIT, binding.limit);
  reply.header(REMAINING, 0);
  reply.header(RESET, Math.ceil(banEndsAt / 1000));
  reply.header(POLICY, `${policyHeader(windows)}, "ban";q=0;w=${banSeconds}`);
  reply.header(STATE, `${state}"ban";r=0;t=${secondsUntil(banEndsAt, now)}`);
}

/**
 * Headers for a refusal taken before the key is known (key store down, overload): the per-address
 * limit reported as exhausted until the client may retry.
 */
export function setExhaustedAnonymousHeaders(reply: FastifyReply, perMinute: number, now: number, until: number): void {
  setRateLimitHeaders(
    reply,
    [{ name: 'anonymous', scope: 'key', limit: perMinute, remaining: 0, windowSeconds: 60, resetAt: until }],
    now,
    until,
  );
}
