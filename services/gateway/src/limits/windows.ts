/*
 * The windows a plan or key may limit: one entry each, shortest first. Everything that names a
 * window takes it from here: the limit policy (policy.ts), the admin API's schemas (`limits`,
 * the plans' windows, the live usage), PLANS_FILE and the keys file, the keys CLI's flags and
 * its text, the console's fields and labels (served as /console/key-rules.js) and the table of
 * windows in docs/limits-and-bans.md (a test holds it to this one).
 *
 * A new window is one entry here. What else it needs is engine support, and only for a period
 * the engines do not know yet:
 * - a rolling window (counted `fixed` or `sliding`, as the plan's algorithm says) needs nothing
 *   more: both limiters (engines/memory-key-limiter.ts, engines/redis-key-limiter.ts with
 *   engines/limit-script.ts) keep any length and bucket; its `suffixes` name its Redis keys and
 *   must not be taken by another window (or the ban's `ban`, `pending`), or two windows share a
 *   counter;
 * - a calendar window needs `start` and `end` of its UTC period here, which both limiters, the
 *   RateLimit headers and the resets use as they are for a key without a customer, and its period
 *   in a customer's billing calendar in calendar.ts (`BillingCalendar`); its `suffix` as above.
 *   The Redis limiter keeps a UTC day inside the usage history's day hash (`isHistoryDay`
 *   there); any other calendar window gets a counter of its own that expires at its period's end;
 * - the quota webhooks watch every calendar window (webhooks/intake/quota-crossings.ts), and
 *   their event's `window` (QuotaData in webhooks/event-types.ts) must name the new one.
 * Keep the entries shortest first: a longer window may not allow less than a shorter one, and
 * the RateLimit headers, the CLI and the console list windows in this order.
 */

const SECOND_MS = 1_000;
export const MINUTE_MS = 60 * SECOND_MS;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

/** The UTC month holding `now`: its first instant, and the first of the next. */
const monthStart = (now: number, months = 0): number => {
  const d = new Date(now);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + months, 1);
};

/**
 * A window counted over its own length: `fixed` from the key's first admitted request, or
 * `sliding` over buckets of `bucketMs` (see WindowRule in policy.ts).
 */
interface RollingCounting {
  kind: 'rolling';
  /** The sliding window's bucket: a small fraction of its length, so capacity comes back soon. */
  bucketMs: number;
  /** Suffixes of its Redis and memory keys; a sliding window keeps a hash, so its key differs. */
  suffixes: { fixed: string; sliding: string };
}

/** A period of the UTC calendar, reset at its start whatever the plan's algorithm. */
interface CalendarCounting {
  kind: 'calendar';
  /** When the period holding `now` started and when it ends (epoch ms). */
  start(now: number): number;
  end(now: number): number;
  /** The period in a refusal's words: `1000 per UTC day`. */
  period: string;
  suffix: string;
}

interface WindowSpec {
  /** Its name in the API's answers, PLANS_FILE and RateLimit-Policy. */
  name: string;
  /** The `limits` field that sets it (admin API, keys file). */
  field: `per${string}`;
  /** The keys CLI's flag for `field`. */
  flag: `--per-${string}`;
  /** How CLI and console write a limit of it: `60/min`. */
  unit: string;
  /** The console's label for its limit field. */
  label: string;
  /** Its length; a calendar window's usual one (the month's 30 days: its own length is reported). */
  lengthMs: number;
  counting: RollingCounting | CalendarCounting;
}

export const WINDOWS = [
  {
    name: 'second',
    field: 'perSecond',
    flag: '--per-second',
    unit: 's',
    label: 'Per second',
    lengthMs: SECOND_MS,
    counting: { kind: 'rolling', bucketMs: 20, suffixes: { fixed: 's', sliding: 'ss' } },
  },
  {
    name: 'minute',
    field: 'perMinute',
    flag: '--per-minute',
    unit: 'min',
    label: 'Per minute',
    lengthMs: MINUTE_MS,
    counting: { kind: 'rolling', bucketMs: SECOND_MS, suffixes: { fixed: 'm', sliding: 'ms' } },
  },
  {
    name: 'hour',
    field: 'perHour',
    flag: '--per-hour',
    unit: 'h',
    label: 'Per hour',
    lengthMs: HOUR_MS,
    counting: { kind: 'rolling', bucketMs: MINUTE_MS, suffixes: { fixed: 'h', sliding: 'hs' } },
  },
  {
    name: 'day',
    field: 'perDay',
    flag: '--per-day',
    unit: 'day',
    label: 'Per day',
    lengthMs: DAY_MS,
    counting: {
      kind: 'calendar',
      start: (now: number) => Math.floor(now / DAY_MS) * DAY_MS,
      end: (now: number) => (Math.floor(now / DAY_MS) + 1) * DAY_MS,
      period: 'UTC day',
      suffix: 'd',
    },
  },
  {
    name: 'month',
    field: 'perMonth',
    flag: '--per-month',
    unit: 'month',
    label: 'Per month',
    lengthMs: 30 * DAY_MS,
    counting: {
      kind: 'calendar',
      start: (now: number) => monthStart(now),
      end: (now: number) => monthStart(now, 1),
      period: 'UTC calendar month',
      suffix: 'mo',
    },
  },
] as const satisfies readonly WindowSpec[];

export type Window = (typeof WINDOWS)[number];
export type WindowName = Window['name'];
export type LimitField = Window['field'];
/** The windows that are periods of the calendar. */
export type CalendarWindow = Extract<Window, { counting: { kind: 'calendar' } }>;
export type CalendarWindowName = CalendarWindow['name'];
export type RollingWindowName = Exclude<WindowName, CalendarWindowName>;

/** The window names, shortest first. */
export const WINDOW_NAMES: readonly WindowName[] = WINDOWS.map((w) => w.name);

/** Whether a window is a period of the calendar. */
export function isCalendar(window: Window): window is CalendarWindow {
  return window.counting.kind === 'calendar';
}

const BY_NAME = new Map<string, Window>(WINDOWS.map((w) => [w.name, w]));
const CALENDAR = new Map<string, CalendarWindow>(WINDOWS.filter(isCalendar).map((w) => [w.name, w]));

/** The window of this name, or undefined for a name that is none (from a file, a query). */
export function windowNamed(name: string): Window | undefined {
  return BY_NAME.get(name);
}

/** Whether a window of this name is a calendar period (`anonymous` and unknown names are not). */
export function isCalendarName(name: string): name is CalendarWindowName {
  return CALENDAR.has(name);
}

/** The calendar window of this name. */
export function calendarWindow(name: CalendarWindowName): CalendarWindow {
  return CALENDAR.get(name) as CalendarWindow;
}

/** An object with one optional member per window's limit field, each of type T. */
export type PerField<T> = { [W in Window as W['field']]?: T };
/** An object with one optional member per window name, each of type T. */
export type PerName<T> = { [W in Window as W['name']]?: T };

/** Builds a PerField or PerName object (a schema's properties, say) from one value per window. */
export function perField<T>(value: (window: Window) => T): Required<PerField<T>> {
  return Object.fromEntries(WINDOWS.map((w) => [w.field, value(w)])) as Required<PerField<T>>;
}
export function perName<T>(value: (window: Window) => T): Required<PerName<T>> {
  return Object.fromEntries(WINDOWS.map((w) => [w.name, value(w)])) as Required<PerName<T>>;
}
