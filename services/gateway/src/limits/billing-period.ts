/**
 * A customer's calendar: its month runs from `anchorDay` at local midnight in `timeZone` to the
 * same day of the next month, and its day from local midnight to the next. Days of 23 or 25 hours
 * (daylight saving) and days that begin at 01:00 (zones that change at midnight) come out of the
 * zone's own rules through Intl, never from fixed offsets.
 */

export interface Billing {
  /** Day of the month the billing period starts on, 1–28 (every month has it). */
  anchorDay: number;
  /** IANA time zone the period's days are counted in. */
  timeZone: string;
}

/** Today's behaviour for keys and customers without billing settings: the 1st, in UTC. */
export const DEFAULT_BILLING: Billing = Object.freeze({ anchorDay: 1, timeZone: 'UTC' });

/** A half-open span of time: `start` ≤ t < `end`. */
export interface Period {
  start: Date;
  end: Date;
}

export const MAX_ANCHOR_DAY = 28;

const MINUTE = 60_000;

interface LocalDate {
  year: number;
  /** 1–12 */
  month: number;
  day: number;
}

/**
 * One formatter per zone: building an Intl.DateTimeFormat costs ~30 µs, using one ~2 µs. The
 * cache is bounded by the number of IANA zones (~600), so it needs no eviction.
 */
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone,
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
    });
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

/**
 * The characters of an IANA zone name (`Europe/Paris`, `America/Port-au-Prince`, `Etc/GMT+5`,
 * `EST5EDT`): it starts with a letter. Runtimes that also take UTC offsets (`+05:00`) as zones
 * would accept those: an offset has no daylight-saving rules and is no IANA name, so it is refused.
 */
const IANA_NAME = /^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/;

/**
 * The zone's IANA name as the caller gave it, its case corrected (`utc` → `UTC`, `europe/paris` →
 * `Europe/Paris`), or null when it is no IANA name the runtime knows. A name the runtime resolves
 * to another (Node 24 turns `Asia/Kolkata` into `Asia/Calcutta` and `Asia/Kathmandu` into
 * `Asia/Katmandu`) is kept as given: both name the same rules, and the customer chose this one.
 */
export function ianaTimeZone(timeZone: string): string | null {
  if (typeof timeZone !== 'string' || timeZone.length === 0 || timeZone.length > 64) return null;
  if (!IANA_NAME.test(timeZone)) return null;
  let resolved: string;
  try {
    resolved = new Intl.DateTimeFormat('en-US', { timeZone }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
  return resolved.toLowerCase() === timeZone.toLowerCase() ? resolved : timeZone;
}

/** What is wrong with billing settings, in words a client can act on; null when they are fine. */
export function billingProblem(billing: { anchorDay?: unknown; timeZone?: unknown }): string | null {
  const { anchorDay, timeZone } = billing;
  if (anchorDay !== undefined) {
    if (typeof anchorDay !== 'number' || !Number.isInteger(anchorDay) || anchorDay < 1 || anchorDay > MAX_ANCHOR_DAY) {
      return `billing.anchorDay must be a whole number from 1 to ${MAX_ANCHOR_DAY} (every month has those days)`;
    }
  }
  if (timeZone !== undefined && (typeof timeZone !== 'string' || ianaTimeZone(timeZone) === null)) {
    return 'billing.timeZone must be an IANA time zone name, such as Europe/Paris or UTC (not an offset such as +05:00)';
  }
  if (typeof timeZone === 'string') {
    const offsets = shiftingOffsets(timeZone, Date.now());
    if (offsets !== null) {
      return (
        `billing.timeZone ${timeZone} is ${offsets.join(' or ')} from UTC by the season: a customer's usage ` +
        "history is kept per local hour, and this zone's clocks change by less than an hour, so its local hours " +
        'do not start the same minutes past the UTC hour all year, an hour of history could straddle its ' +
        'midnight, and its days and billing periods could not be summed exactly; choose a zone whose clocks ' +
        'change by whole hours (such as Australia/Sydney)'
      );
    }
  }
  return null;
}

/** One offset formatter per zone ("GMT+05:30"), for the same reason as formatterFor. */
const offsetFormatters = new Map<string, Intl.DateTimeFormat>();

/** The zone's offset from UTC at an instant, in minutes (east positive). */
function utcOffsetMinutes(at: Date, timeZone: string): number {
  let formatter = offsetFormatters.get(timeZone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat('en-US', { timeZone, timeZoneName: 'longOffset' });
    offsetFormatters.set(timeZone, formatter);
  }
  const name = formatter.formatToParts(at).find((p) => p.type === 'timeZoneName')?.value ?? 'GMT';
  const match = /^GMT([+-])(\d{1,2}):?(\d{2})?$/.exec(name);
  if (!match) return 0; // "GMT": UTC itself
  const minutes = Number(match[2]) * 60 + Number(match[3] ?? 0);
  return match[1] === '-' ? -minutes : minutes;
}

const WEEK_MS = 7 * 86_400_000;

/** Minutes past the UTC hour that a local hour starts at, for an offset (east positive). */
const shiftMinutes = (offset: number): number => ((-offset % 60) + 60) % 60;

/** An offset in minutes as text: `+05:30`, `-03:30`. */
function offsetText(minutes: number): string {
  const abs = Math.abs(minutes);
  return `${minutes < 0 ? '-' : '+'}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}

/**
 * How far past the UTC hour the zone's local hours start at an instant, in ms: 30 minutes in
 * India (+05:30) and Newfoundland (-03:30), 15 in Nepal (+05:45), 0 wherever the offset is whole
 * hours. A customer's usage history keeps its hours from there (usage-history.ts hourStart), so
 * that its local days and billing periods, which start on a local hour, are sums of them.
 */
export function localHourShiftMs(timeZone: string, at: number): number {
  return shiftMinutes(utcOffsetMinutes(new Date(at), timeZone)) * MINUTE;
}

/**
 * The zone's offsets as text ("+10:30", "+11:00") when, from a year before `now` to five years
 * after it, its local hours do not always start the same minutes past the UTC hour (Lord Howe
 * Island's daylight saving moves its clocks by half an hour); null when they always do, as in
 * every zone whose changes are whole hours (India, Nepal, Newfoundland, South Australia). Weekly
 * samples: no zone keeps an offset for less than a week.
 */
function shiftingOffsets(timeZone: string, now: number): string[] | null {
  const offsets = new Set<number>();
  const shifts = new Set<number>();
  for (let at = now - 52 * WEEK_MS; at < now + 5 * 52 * WEEK_MS; at += WEEK_MS) {
    const minutes = utcOffsetMinutes(new Date(at), timeZone);
    offsets.add(minutes);
    shifts.add(shiftMinutes(minutes));
  }
  if (shifts.size < 2) return null;
  return [...offsets].sort((x, y) => x - y).map(offsetText);
}

/** The local calendar date of an instant in a zone. */
function localDate(at: Date, timeZone: string): LocalDate {
  const parts = formatterFor(timeZone).formatToParts(at);
  const value = (type: string) => Number(parts.find((p) => p.type === type)?.value);
  return { year: value('year'), month: value('month'), day: value('day') };
}

function compareDates(a: LocalDate, b: LocalDate): number {
  return a.year - b.year || a.month - b.month || a.day - b.day;
}

/** The date `months` months after (or before) a date's month, on `day`; JS normalises overflow. */
function addMonths(date: LocalDate, months: number, day: number): LocalDate {
  const d = new Date(Date.UTC(date.year, date.month - 1 + months, day));
  return { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate() };
}

function addDays(date: LocalDate, days: number): LocalDate {
  const d = new Date(Date.UTC(date.year, date.month - 1, date.day + days));
  return { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate() };
}

/** UTC offsets run from −12:00 to +14:00: a local day starts within 14 h either side of UTC's. */
const SEARCH_MINUTES = 15 * 60;

/**
 * The first instant whose local date in the zone is `date` (or later): local midnight, or the end
 * of the gap when the clocks skip midnight (America/Santiago in September starts its day at
 * 01:00). Found by bisection over whole minutes, since every zone's transitions in the tz
 * database since 1970 fall on a minute; about 11 formatter calls.
 */
export function startOfLocalDay(date: LocalDate, timeZone: string): Date {
  const utcMidnight = Date.UTC(date.year, date.month - 1, date.day);
  let low = utcMidnight - SEARCH_MINUTES * MINUTE; // local date before `date`
  let high = utcMidnight + SEARCH_MINUTES * MINUTE; // local date on or after `date`
  while (high - low > MINUTE) {
    const mid = low + Math.floor((high - low) / MINUTE / 2) * MINUTE;
    if (compareDates(localDate(new Date(mid), timeZone), date) >= 0) high = mid;
    else low = mid;
  }
  return new Date(high);
}

/** The local day (midnight to midnight in the zone) that holds `at`: 23, 24 or 25 hours. */
export function dayPeriod(at: Date, timeZone: string): Period {
  const today = localDate(at, timeZone);
  return { start: startOfLocalDay(today, timeZone), end: startOfLocalDay(addDays(today, 1), timeZone) };
}

/** The billing period that holds `at`: from the anchor day's local midnight to the next month's. */
export function billingPeriod(at: Date, billing: Billing): Period {
  const today = localDate(at, billing.timeZone);
  const first =
    today.day >= billing.anchorDay ? addMonths(today, 0, billing.anchorDay) : addMonths(today, -1, billing.anchorDay);
  return {
    start: startOfLocalDay(first, billing.timeZone),
    end: startOfLocalDay(addMonths(first, 1, billing.anchorDay), billing.timeZone),
  };
}

/** The billing period before the one that holds `at`. */
export function previousBillingPeriod(at: Date, billing: Billing): Period {
  return billingPeriod(new Date(billingPeriod(at, billing).start.getTime() - 1), billing);
}
