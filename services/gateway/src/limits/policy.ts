import type { CreditRule, CreditTerms } from '../credits/credit-terms.js';
import type { Billing } from './billing-period.js';
import { type Calendar, calendarFor, UTC_CALENDAR } from './calendar.js';
import {
  type CalendarWindowName,
  calendarWindow,
  isCalendar,
  type PerField,
  type RollingWindowName,
  WINDOWS,
} from './windows.js';

export type { CalendarWindowName, LimitField, WindowName } from './windows.js';
export { MINUTE_MS, WINDOW_NAMES } from './windows.js';

/** The `limits` field that sets each window. */
export const LIMIT_FIELDS = Object.fromEntries(WINDOWS.map((w) => [w.name, w.field])) as {
  [W in (typeof WINDOWS)[number] as W['name']]: W['field'];
};

/** A limit per window; a key or plan sets at least one. */
export type Limits = PerField<number>;

/** How the second, minute and hour windows count (day and month are calendar quotas). */
export type Algorithm = 'fixed' | 'sliding';
export const ALGORITHMS: readonly Algorithm[] = ['fixed', 'sliding'];

interface RuleBase {
  limit: number;
  /** Fixed and sliding: the window's length. Calendar: its usual length (a day, 30 days). */
  lengthMs: number;
  /** Sliding: the bucket length; 0 otherwise. */
  bucketMs: number;
  /** Suffix of the window's Redis key; sliding windows keep a hash, so their keys differ. */
  suffix: string;
  /**
   * Whose window it is: the key's own, or its customer's, which every key of the customer counts
   * against together (the limiters keep it under the customer, not the key).
   */
  scope: WindowScope;
}

/** A key's own window, or one its customer's keys share. */
export type WindowScope = 'key' | 'customer';

/**
 * How one window is kept:
 * - `fixed`: starts at the key's first admitted request and lasts `lengthMs`, so resets spread
 *   out over time instead of herding at clock boundaries;
 * - `sliding`: counts what was admitted in the buckets of `bucketMs` that the last `lengthMs`
 *   overlaps. Counting the oldest bucket whole, though part of it has slid out, means no span of
 *   `lengthMs` ever admits more than the limit; the price is that capacity comes back up to one
 *   bucket (1/50 or 1/60 of the window) late;
 * - `calendar`: a period of `calendar`: the UTC day or month, reset at 00:00 UTC (on the 1st for
 *   a month), or for a key of a customer the customer's billing day and month (calendar.ts).
 */
export type WindowRule =
  | (RuleBase & { name: RollingWindowName; kind: 'fixed' | 'sliding' })
  | (RuleBase & { name: CalendarWindowName; kind: 'calendar'; calendar: Calendar });

/** What the limiter enforces for a key: its windows, shortest first, and whether it refuses. */
export interface LimitPolicy {
  windows: readonly WindowRule[];
  /**
   * A credit balance every admitted request spends its cost from, in the same limiter call as the
   * windows; absent (no balance to read) for keys and customers without credits.
   */
  credits?: CreditRule;
  /**
   * Shadow mode: decisions are taken and reported, but the gate refuses nothing for them, and no
   * refusal counts toward a ban (a plan tried in shadow must not leave keys banned when it goes live).
   */
  shadow: boolean;
  /** Names the windows, limits and algorithm: equal ids, equal policies. */
  id: string;
  /**
   * Where the usage history's hours of the key (and of its customer) start past the UTC hour, in
   * ms: 0, or for a key of a customer in a zone a part-hour off UTC that zone's (calendar.ts).
   */
  hourShiftMs: number;
}

const policies = new Map<string, LimitPolicy>();

/** The window's rule as the policy's algorithm and calendar count it. */
function ruleFor(
  window: (typeof WINDOWS)[number],
  limit: number,
  algorithm: Algorithm,
  scope: WindowScope,
  calendar: Calendar,
): WindowRule {
  const { lengthMs } = window;
  if (isCalendar(window)) {
    return {
      name: window.name,
      limit,
      kind: 'calendar',
      lengthMs,
      bucketMs: 0,
      suffix: window.counting.suffix,
      scope,
      calendar,
    };
  }
  const sliding = algorithm === 'sliding';
  const { bucketMs, suffixes } = window.counting;
  return {
    name: window.name,
    limit,
    kind: algorithm,
    lengthMs,
    bucketMs: sliding ? bucketMs : 0,
    suffix: sliding ? suffixes.sliding : suffixes.fixed,
    scope,
  };
}

/** A built policy of this id, or the one `build` makes, kept for the next request. */
function cached(id: string, build: () => LimitPolicy): LimitPolicy {
  let policy = policies.get(id);
  if (policy) return policy;
  policy = build();
  if (policy.windows.length === 0) throw new Error('a limit policy needs at least one window');
  // Bounded: limits come from plans and keys an operator made, but a cache must not be a leak.
  if (policies.size < 10_000) policies.set(id, policy);
  return policy;
}

/** `,minute=60,day=1000`: the part of a policy's id that names these limits. */
function limitsId(limits: Limits | undefined, mark = ''): string {
  let id = '';
  if (!limits) return id;
  for (const window of WINDOWS) {
    const limit = limits[window.field];
    if (limit !== undefined) id += `,${mark}${window.name}=${limit}`;
  }
  return id;
}

/**
 * The policy for these limits, built once per distinct (limits, algorithm, shadow): plans are few
 * and enterprise limits repeat, so the gate finds a built policy on every request.
 */
export function policyFor(limits: Limits, algorithm: Algorithm = 'fixed', shadow = false): LimitPolicy {
  const id = `${algorithm}${shadow ? '/shadow' : ''}${limitsId(limits)}`;
  return cached(id, () => {
    const windows: WindowRule[] = [];
    for (const window of WINDOWS) {
      const limit = limits[window.field];
      if (limit !== undefined) windows.push(ruleFor(window, limit, algorithm, 'key', UTC_CALENDAR));
    }
    return { windows, shadow, id, hourShiftMs: 0 };
  });
}

/**
 * The policy of a key of a customer: the customer's windows (`shared`: its plan's with its own
 * limits over them), which all its keys count against together, and the key's own limits, if
 * any, as windows of the key; all decided in one limiter call. Calendar windows of both count
 * in the customer's billing calendar. Shortest first; of two windows of one length, the key's
 * first.
 */
export function customerPolicyFor(
  shared: Limits,
  own: Limits | undefined,
  algorithm: Algorithm,
  shadow: boolean,
  billing: Billing,
): LimitPolicy {
  const calendar = calendarFor(billing);
  const id = `${algorithm}${shadow ? '/shadow' : ''}@${calendar.id}${limitsId(shared, 'c:')}${limitsId(own)}`;
  return cached(id, () => {
    const windows: WindowRule[] = [];
    for (const window of WINDOWS) {
      const mine = own?.[window.field];
      if (mine !== undefined) windows.push(ruleFor(window, mine, algorithm, 'key', calendar));
      const theirs = shared[window.field];
      if (theirs !== undefined) windows.push(ruleFor(window, theirs, algorithm, 'customer', calendar));
    }
    return { windows, shadow, id, hourShiftMs: calendar.hourShiftMs };
  });
}

/** When the calendar window holding `now` ends (epoch ms): the next 00:00 UTC, or the next 1st. */
export function periodEnd(name: CalendarWindowName, now: number): number {
  return calendarWindow(name).counting.end(now);
}

/** When the period of a calendar window that holds `now` ends (epoch ms), in the rule's calendar. */
export function ruleEnd(rule: Extract<WindowRule, { kind: 'calendar' }>, now: number): number {
  return rule.calendar.end(rule.name, now);
}

/**
 * The window's length in seconds as RateLimit-Policy reports it: a calendar period's own length
 * (a customer's local day of 23 or 25 hours, its billing month).
 */
export function windowSeconds(rule: WindowRule, now: number): number {
  if (rule.kind !== 'calendar') return rule.lengthMs / 1000;
  return (rule.calendar.end(rule.name, now) - rule.calendar.start(rule.name, now)) / 1000;
}

/** How long from `now` until a window that starts empty now would first give capacity back. */
export function freshResetMs(rule: WindowRule, now: number): number {
  if (rule.kind === 'calendar') return ruleEnd(rule, now) - now;
  if (rule.kind === 'fixed') return rule.lengthMs;
  return (Math.floor(now / rule.bucketMs) + rule.lengthMs / rule.bucketMs + 1) * rule.bucketMs - now;
}

/**
 * The policy with a credit balance beside its windows (credits: refill in `calendar`, the billing
 * calendar of the balance's owner), built once per distinct terms as the policy itself.
 */
export function withCredits(policy: LimitPolicy, terms: CreditTerms, calendar: Calendar): LimitPolicy {
  const refill = terms.refill ?? null;
  const id = `${policy.id}+credits${refill ? `:${refill.amount}/${refill.every}@${calendar.id}` : ''}`;
  return cached(id, () => ({ ...policy, id, credits: { refill, calendar } }));
}
