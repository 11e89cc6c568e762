import { type Billing, billingPeriod, dayPeriod, startOfLocalDay } from '../limits/billing-period.js';
import { calendarFor } from '../limits/calendar.js';
import { type Counts, withRefused } from '../usage/reports.js';
import {
  addCounts,
  emptyCounts,
  HOUR_MS,
  type HourUsage,
  hourStart,
  type UsageCounts,
} from '../usage/usage-history.js';

/*
 * A customer's history in the steps of its own calendar: its hours, its local days (23, 24 or 25
 * hours) or its billing periods, summed from the hours the history keeps. Exact because the
 * history keeps the customer's hours from its local hour (a UTC hour, or in a zone a part-hour off
 * UTC the hour from :30 or :15 past it; usage-history.ts hourStart), and every day and period
 * starts on a local hour. onHours() is the check for what does not: a zone whose clocks change by
 * less than an hour (billingProblem refuses it; a record may predate that).
 */

export type CustomerGranularity = 'hour' | 'day' | 'period';

/** A half-open span of epoch ms: start ≤ t < end. */
export interface Step {
  start: number;
  end: number;
}

/**
 * A local day or billing period costs ~83 µs to find (Intl bisection); a history of 35 days asks
 * for the same few dozen on every request. Bounded: cleared when full, as answers are cheap to redo.
 */
const CACHE_MAX = 10_000;
const cache = new Map<string, Step>();

function cached(key: string, find: () => { start: Date; end: Date }): Step {
  let step = cache.get(key);
  if (!step) {
    const found = find();
    step = { start: found.start.getTime(), end: found.end.getTime() };
    if (cache.size >= CACHE_MAX) cache.clear();
    cache.set(key, step);
  }
  return step;
}

/** The step of the customer's calendar that holds `at`. */
export function stepAt(granularity: CustomerGranularity, billing: Billing, at: number): Step {
  if (granularity === 'hour') {
    const start = hourStart(at, calendarFor(billing).hourShiftMs);
    return { start, end: start + HOUR_MS };
  }
  if (granularity === 'day')
    return cached(`d\n${billing.timeZone}\n${at}`, () => dayPeriod(new Date(at), billing.timeZone));
  return cached(`p\n${billing.anchorDay}\n${billing.timeZone}\n${at}`, () => billingPeriod(new Date(at), billing));
}

/** The first instant of a local date (YYYY-MM-DD, already checked to exist) in the customer's zone. */
export function localMidnight(date: string, billing: Billing): number {
  const [year, month, day] = date.split('-').map(Number) as [number, number, number];
  return startOfLocalDay({ year, month, day }, billing.timeZone).getTime();
}

/** Every step from the one starting at `from` up to `to` (a step boundary), oldest first. */
export function stepsOf(granularity: CustomerGranularity, billing: Billing, from: number, to: number): Step[] {
  const steps: Step[] = [];
  for (let start = from; start < to; ) {
    const { end } = stepAt(granularity, billing, start);
    steps.push({ start, end });
    start = end;
  }
  return steps;
}

/**
 * Whether every step starts and ends where one of the customer's hours starts (hourStart with its
 * calendar's hourShiftMs), so that its hours sum into each exactly.
 */
export function onHours(steps: Step[], billing: Billing): boolean {
  const shift = calendarFor(billing).hourShiftMs;
  return steps.every((s) => hourStart(s.start, shift) === s.start && hourStart(s.end, shift) === s.end);
}

/** Each step with the counts of the hours inside it, empty steps included. */
export function stepSeries(hours: HourUsage[], steps: Step[]): Array<Step & Counts> {
  const sums: UsageCounts[] = steps.map(() => emptyCounts());
  for (const usage of hours) {
    // Steps are sorted and contiguous: the last one starting at or before the hour holds it.
    let low = 0;
    let high = steps.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if ((steps[mid] as Step).start <= usage.hour) low = mid;
      else high = mid - 1;
    }
    const step = steps[low];
    if (step && usage.hour >= step.start && usage.hour < step.end) addCounts(sums[low] as UsageCounts, usage);
  }
  return steps.map((step, i) => ({ ...step, ...withRefused(sums[i] as UsageCounts) }));
}
