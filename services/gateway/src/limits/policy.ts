/** The windows a plan may limit, shortest first. */
export const WINDOW_NAMES = ['second', 'minute', 'hour', 'day', 'month'] as const;
export type WindowName = (typeof WINDOW_NAMES)[number];

/** The `limits` field that sets each window. */
export const LIMIT_FIELDS = {
  second: 'perSecond',
  minute: 'perMinute',
  hour: 'perHour',
  day: 'perDay',
  month: 'perMonth',
} as const satisfies Record<WindowName, string>;
export type LimitField = (typeof LIMIT_FIELDS)[WindowName];

/** A limit per window; a key or plan sets at least one. */
export type Limits = Partial<Record<LimitField, number>>;

/** How the second, minute and hour windows count (day and month are calendar quotas). */
export type Algorithm = 'fixed' | 'sliding';
export const ALGORITHMS: readonly Algorithm[] = ['fixed', 'sliding'];

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
export interface WindowRule {
  name: WindowName;
  limit: number;
  kind: 'fixed' | 'sliding' | 'calendar';
  /** Fixed and sliding: the window's length. Calendar: its usual length (a day, 30 days). */
  lengthMs: number;
  /** Sliding: the bucket length; 0 otherwise. */
  bucketMs: number;
  /** Suffix of the window's Redis key; sliding windows keep a hash, so their keys differ. */
  suffix: string;
}

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

const SECOND_MS = 1_000;
export const MINUTE_MS = 60 * SECOND_MS;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;
const MONTH_MS = 30 * DAY_MS;

/** Window lengths, and for sliding windows their bucket: 1/50 of a second, 1/60 of a minute or hour. */
const SHAPES: Record<WindowName, { lengthMs: number; bucketMs: number; fixed: string; sliding: string }> = {
  second: { lengthMs: SECOND_MS, bucketMs: 20, fixed: 's', sliding: 'ss' },
  minute: { lengthMs: MINUTE_MS, bucketMs: SECOND_MS, fixed: 'm', sliding: 'ms' },
  hour: { lengthMs: HOUR_MS, bucketMs: MINUTE_MS, fixed: 'h', sliding: 'hs' },
  day: { lengthMs: DAY_MS, bucketMs: 0, fixed: 'd', sliding: 'd' },
  month: { lengthMs: MONTH_MS, bucketMs: 0, fixed: 'mo', sliding: 'mo' },
};

function isCalendar(name: WindowName): boolean {
  return name === 'day' || name === 'month';
}

const policies = new Map<string, LimitPolicy>();

/**
 * The policy for these limits, built once per distinct (limits, algorithm, shadow): plans are few
 * and enterprise limits repeat, so the gate finds a built policy on every request.
 */
export function policyFor(limits: Limits, algorithm: Algorithm = 'fixed', shadow = false): LimitPolicy {
  let id = `${algorithm}${shadow ? '/shadow' : ''}`;
  for (const name of WINDOW_NAMES) {
    const limit = limits[LIMIT_FIELDS[name]];
    if (limit !== undefined) id += `,${name}=${limit}`;
  }
  let policy = policies.get(id);
  if (policy) return policy;
  const windows: WindowRule[] = [];
  for (const name of WINDOW_NAMES) {
    const limit = limits[LIMIT_FIELDS[name]];
    if (limit === undefined) continue;
    const shape = SHAPES[name];
    const kind = isCalendar(name) ? 'calendar' : algorithm;
    windows.push({
      name,
      limit,
      kind,
      lengthMs: shape.lengthMs,
      bucketMs: kind === 'sliding' ? shape.bucketMs : 0,
      suffix: kind === 'sliding' ? shape.sliding : shape.fixed,
    });
  }
  if (windows.length === 0) throw new Error('a limit policy needs at least one window');
  policy = { windows, shadow, id };
  // Bounded: limits come from plans and keys an operator made, but a cache must not be a leak.
  if (policies.size < 10_000) policies.set(id, policy);
  return policy;
}

/** When the calendar window holding `now` ends (epoch ms): the next 00:00 UTC, or the next 1st. */
export function periodEnd(name: 'day' | 'month', now: number): number {
  if (name === 'day') return (Math.floor(now / DAY_MS) + 1) * DAY_MS;
  const d = new Date(now);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/** The window's length in seconds as RateLimit-Policy reports it: a calendar month's own length. */
export function windowSeconds(rule: WindowRule, now: number): number {
  if (rule.name !== 'month') return rule.lengthMs / 1000;
  const end = periodEnd('month', now);
  const d = new Date(now);
  return (end - Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1)) / 1000;
}

/** How long from `now` until a window that starts empty now would first give capacity back. */
export function freshResetMs(rule: WindowRule, now: number): number {
  if (rule.kind === 'calendar') return periodEnd(rule.name as 'day' | 'month', now) - now;
  if (rule.kind === 'fixed') return rule.lengthMs;
  return (Math.floor(now / rule.bucketMs) + rule.lengthMs / rule.bucketMs + 1) * rule.bucketMs - now;
}
