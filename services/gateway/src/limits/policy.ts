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
}

/**
 * How one window is kept:
 * - `fixed`: starts at the key's first admitted request and lasts `lengthMs`, so resets spread
 *   out over time instead of herding at clock boundaries;
 * - `sliding`: counts what was admitted in the buckets of `bucketMs` that the last `lengthMs`
 *   overlaps. Counting the oldest bucket whole, though part of it has slid out, means no span of
 *   `lengthMs` ever admits more than the limit; the price is that capacity comes back up to one
 *   bucket (1/50 or 1/60 of the window) late;
 * - `calendar`: the UTC day or month, reset at 00:00 UTC (on the 1st for a month).
 */
export type WindowRule =
  | (RuleBase & { name: RollingWindowName; kind: 'fixed' | 'sliding' })
  | (RuleBase & { name: CalendarWindowName; kind: 'calendar' });

/** What the limiter enforces for a key: its windows, shortest first, and whether it refuses. */
export interface LimitPolicy {
  windows: readonly WindowRule[];
  /**
   * Shadow mode: decisions are taken and reported, but the gate refuses nothing for them, and no
   * refusal counts toward a ban (a plan tried in shadow must not leave keys banned when it goes live).
   */
  shadow: boolean;
  /** Names the windows, limits and algorithm: equal ids, equal policies. */
  id: string;
}

const policies = new Map<string, LimitPolicy>();

/**
 * The policy for these limits, built once per distinct (limits, algorithm, shadow): plans are few
 * and enterprise limits repeat, so the gate finds a built policy on every request.
 */
export function policyFor(limits: Limits, algorithm: Algorithm = 'fixed', shadow = false): LimitPolicy {
  let id = `${algorithm}${shadow ? '/shadow' : ''}`;
  for (const window of WINDOWS) {
    const limit = limits[window.field];
    if (limit !== undefined) id += `,${window.name}=${limit}`;
  }
  let policy = policies.get(id);
  if (policy) return policy;
  const windows: WindowRule[] = [];
  for (const window of WINDOWS) {
    const limit = limits[window.field];
    if (limit === undefined) continue;
    const { lengthMs } = window;
    if (isCalendar(window)) {
      windows.push({
        name: window.name,
        limit,
        kind: 'calendar',
        lengthMs,
        bucketMs: 0,
        suffix: window.counting.suffix,
      });
      continue;
    }
    const sliding = algorithm === 'sliding';
    const { bucketMs, suffixes } = window.counting;
    windows.push({
      name: window.name,
      limit,
      kind: algorithm,
      lengthMs,
      bucketMs: sliding ? bucketMs : 0,
      suffix: sliding ? suffixes.sliding : suffixes.fixed,
    });
  }
  if (windows.length === 0) throw new Error('a limit policy needs at least one window');
  policy = { windows, shadow, id };
  // Bounded: limits come from plans and keys an operator made, but a cache must not be a leak.
  if (policies.size < 10_000) policies.set(id, policy);
  return policy;
}

/** When the calendar window holding `now` ends (epoch ms): the next 00:00 UTC, or the next 1st. */
export function periodEnd(name: CalendarWindowName, now: number): number {
  return calendarWindow(name).counting.end(now);
}

/** The window's length in seconds as RateLimit-Policy reports it: a calendar period's own length. */
export function windowSeconds(rule: WindowRule, now: number): number {
  if (rule.kind !== 'calendar') return rule.lengthMs / 1000;
  const { counting } = calendarWindow(rule.name);
  return (counting.end(now) - counting.start(now)) / 1000;
}

/** How long from `now` until a window that starts empty now would first give capacity back. */
export function freshResetMs(rule: WindowRule, now: number): number {
  if (rule.kind === 'calendar') return periodEnd(rule.name, now) - now;
  if (rule.kind === 'fixed') return rule.lengthMs;
  return (Math.floor(now / rule.bucketMs) + rule.lengthMs / rule.bucketMs + 1) * rule.bucketMs - now;
}
