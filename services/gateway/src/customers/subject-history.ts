import { ApiError } from '@animal-store/common/errors.js';
import { instant } from '@animal-store/common/rfc3339.js';
import type { Billing } from '../limits/billing-period.js';
import { sumOf, withRefused } from '../usage/reports.js';
import { DAY_MS, HOUR_MS, type HourUsage, type UsageHistory } from '../usage/usage-history.js';
import { type CustomerGranularity, localMidnight, onHours, stepAt, stepSeries, stepsOf } from './customer-steps.js';

/** What a history query asks: a range (instants, or dates of the subject's calendar) or a period, and its steps. */
export interface HistoryRequest {
  from?: string;
  to?: string;
  period?: 'current' | 'previous';
  granularity?: CustomerGranularity;
}

const iso = (ms: number) => new Date(ms).toISOString();

const STEP_NAMES: Record<CustomerGranularity, string> = { hour: 'hour', day: 'day', period: 'billing period' };
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** The date after a YYYY-MM-DD date, as text. */
const nextDate = (date: string) => new Date(Date.parse(`${date}T00:00:00Z`) + DAY_MS).toISOString().slice(0, 10);

/**
 * An instant of the query: RFC 3339 with a zone, or a date of the customer's calendar. `to` as a
 * date includes that day, so it names the next local midnight.
 */
function queryInstant(text: string, name: 'from' | 'to', billing: Billing): number {
  const at = instant(text, name); // a 400 for text that is no instant or no real date
  if (!DATE.test(text)) return at;
  return localMidnight(name === 'to' ? nextDate(text) : text, billing);
}

/**
 * The steps [from, to) a query asks for, in a calendar: the customer's, or UTC with the 1st for a
 * key's own history (DEFAULT_BILLING). A `to` inside a step includes it
 * (`to=2026-11-30T23:59:59Z` keeps the 30th in an export); a range reaching past now ends with the
 * step that holds now. `period` is the calendar's billing period.
 */
function historyRange(
  query: HistoryRequest,
  now: number,
  granularity: CustomerGranularity,
  billing: Billing,
): { from: number; to: number } {
  const step = (at: number) => stepAt(granularity, billing, at);
  const current = step(now).end;
  if (query.period !== undefined) {
    if (query.from !== undefined || query.to !== undefined) {
      throw new ApiError(
        400,
        'invalid_request',
        'period names the range itself: give period, or from and to, not both',
      );
    }
    const period = stepAt('period', billing, now);
    if (query.period === 'current') return { from: period.start, to: current };
    return { from: stepAt('period', billing, period.start - 1).start, to: period.start };
  }
  let to = current;
  if (query.to !== undefined) to = Math.min(step(queryInstant(query.to, 'to', billing) - 1).end, current);
  let from: number;
  if (query.from !== undefined) from = step(queryInstant(query.from, 'from', billing)).start;
  else if (granularity === 'hour') from = to - 24 * HOUR_MS;
  // Thirty local days: the day holding a moment in the middle of the thirtieth back (days are 23–25 h).
  else if (granularity === 'day') from = step(to - 30 * DAY_MS + 12 * HOUR_MS).start;
  else from = step(to - 1).start;
  if (from >= current) {
    throw new ApiError(400, 'invalid_request', `from must not be after the current ${STEP_NAMES[granularity]}`);
  }
  if (from >= to) throw new ApiError(400, 'invalid_request', 'from must be before to');
  return { from, to };
}

/** The first step whose every hour the history still keeps. */
function oldestWholeStep(granularity: CustomerGranularity, billing: Billing, now: number, retentionMs: number): number {
  const oldestHour = stepAt('hour', billing, now - retentionMs).start;
  const holding = stepAt(granularity, billing, oldestHour);
  return holding.start === oldestHour ? oldestHour : holding.end;
}

/**
 * Who is billed and limited, as its history is read: a customer, in its own calendar, or a key
 * (alone, or one of a customer's) in the UTC calendar with the 1st (DEFAULT_BILLING).
 */
export interface HistorySubject {
  id: string;
  name: string;
  billing: Billing;
}

/**
 * A subject's usage over time in its calendar: what the admin routes (a customer's, a key's), the
 * portal and the invoice preview answer. `hoursOf` names whose hours are summed: the subject's own
 * by default, or one key's (with the customer it counts under) within the subject's steps. Throws
 * the query's 400s; a history it cannot read goes to `unavailable` (the listener's 503).
 */
export async function subjectHistory(
  history: UsageHistory,
  subject: HistorySubject,
  query: HistoryRequest,
  now: number,
  unavailable: (err: unknown) => never,
  hoursOf: { id: string; customerId?: string } = { id: subject.id },
) {
  const retentionDays = Math.round(history.retentionMs / DAY_MS);
  const granularity = query.granularity ?? 'hour';
  const billing = subject.billing;
  const { from, to } = historyRange(query, now, granularity, billing);
  const oldest = oldestWholeStep(granularity, billing, now, history.retentionMs);
  if (from < oldest) {
    throw new ApiError(
      400,
      'invalid_request',
      `The history is kept for ${retentionDays} days (USAGE_HISTORY_DAYS): from must be on or after ${iso(oldest)}`,
    );
  }
  const steps = stepsOf(granularity, billing, from, to);
  if (!onHours(steps, billing)) {
    // A record from before billingProblem refused such zones: some of its days start within an hour.
    throw new ApiError(
      409,
      'conflict',
      `Customer ${subject.id}'s billing.timeZone ${billing.timeZone} changes its clocks by less than an hour, so some of its days start within an hour of its history: ask for granularity=hour, or give the customer a zone whose clocks change by whole hours`,
    );
  }
  let hours: HourUsage[];
  try {
    hours = await history.hours(hoursOf.id, from, to, hoursOf.customerId);
  } catch (err) {
    unavailable(err);
  }
  return {
    id: subject.id,
    name: subject.name,
    granularity,
    billing,
    from: iso(from),
    to: iso(to),
    retentionDays,
    totals: withRefused(sumOf(hours)),
    series: stepSeries(hours, steps).map(({ start, end, ...counts }) => ({
      start: iso(start),
      end: iso(end),
      ...counts,
    })),
  };
}
