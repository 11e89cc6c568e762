import { ApiError, clipped } from './errors.js';

/** RFC 3339 date-time: a full date, a full time, and a zone (Z or an offset). */
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;
/** An RFC 3339 full-date alone. */
const FULL_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** The moment the text names, or why it names none: not RFC 3339 text, or a date or time that does not exist. */
export type Rfc3339 = { ms: number; problem?: undefined } | { problem: 'format' | 'calendar' };

/**
 * Reads RFC 3339 text as a moment, checked against the calendar: Date.parse rolls 2026-11-31 over
 * to 1 December and takes T24:00:00 for the next midnight, where a date or time that does not
 * exist is a typo. Leap seconds (:60) are refused: no clock here can name one. With `dates`, a
 * full date alone (YYYY-MM-DD) is taken too, as its midnight UTC.
 */
export function readRfc3339(text: string, dates = false): Rfc3339 {
  const dateTime = DATE_TIME.exec(text);
  const date = dateTime ?? (dates ? FULL_DATE.exec(text) : null);
  if (!date) return { problem: 'format' };
  const [year, month, day, hour, minute, second, , offsetHours, offsetMinutes] = date
    .slice(1)
    .map((part) => (part === undefined || part.startsWith('.') ? 0 : Number(part)));
  const daysInMonth = new Date(Date.UTC(year ?? 0, month ?? 0, 0)).getUTCDate();
  const real =
    month !== undefined &&
    month >= 1 &&
    month <= 12 &&
    day !== undefined &&
    day >= 1 &&
    day <= daysInMonth &&
    (hour ?? 0) <= 23 &&
    (minute ?? 0) <= 59 &&
    (second ?? 0) <= 59 &&
    (offsetHours ?? 0) <= 23 &&
    (offsetMinutes ?? 0) <= 59;
  if (!real) return { problem: 'calendar' };
  const ms = Date.parse(dateTime ? text.replace(' ', 'T').toUpperCase() : `${text}T00:00:00Z`);
  return Number.isNaN(ms) ? { problem: 'format' } : { ms };
}

/** An instant from the query: RFC 3339 date-time or a date (midnight UTC), one that exists. */
export function instant(text: string, name: string): number {
  const read = readRfc3339(text, true);
  if (read.problem === undefined) return read.ms;
  throw new ApiError(
    400,
    'invalid_request',
    read.problem === 'calendar'
      ? `${name} is not a real date and time: "${clipped(text)}"`
      : `${name} must be an RFC 3339 date-time or a date (YYYY-MM-DD), not "${clipped(text)}"`,
  );
}
