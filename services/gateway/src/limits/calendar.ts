import { type Billing, billingPeriod, DEFAULT_BILLING, dayPeriod, localHourShiftMs } from './billing-period.js';
import { type CalendarWindowName, calendarWindow } from './windows.js';

/**
 * The periods the calendar windows (day, month) count in: the UTC calendar for a key without a
 * customer, or a customer's billing calendar (its day from local midnight in its zone, its month
 * from its anchor day). One per billing setting, shared by every policy that has it.
 */
export interface Calendar {
  /** `''` for the UTC calendar (day 1, UTC): what keys without a customer have. */
  readonly id: string;
  /** Whether the day is the UTC day: only then may a limiter keep it in the usage history's day hash. */
  readonly utcDay: boolean;
  /**
   * How far past the UTC hour the calendar's local hours start (ms): 0, or 30 or 15 minutes in a
   * zone a part-hour off UTC (India, Nepal). The usage history keeps a customer's hours, and its
   * keys', from there, so that its days and months are sums of them (usage-history.ts hourStart).
   */
  readonly hourShiftMs: number;
  /** When the period holding `now` started and when it ends (epoch ms). */
  start(name: CalendarWindowName, now: number): number;
  end(name: CalendarWindowName, now: number): number;
  /** The period in a refusal's words: `UTC day`, `day in Europe/Paris`. */
  period(name: CalendarWindowName): string;
}

/** Today's behaviour: the UTC day, the UTC month from the 1st (windows.ts). */
export const UTC_CALENDAR: Calendar = Object.freeze({
  id: '',
  utcDay: true,
  hourShiftMs: 0,
  start: (name: CalendarWindowName, now: number) => calendarWindow(name).counting.start(now),
  end: (name: CalendarWindowName, now: number) => calendarWindow(name).counting.end(now),
  period: (name: CalendarWindowName) => calendarWindow(name).counting.period,
});

/** A span the calendar computed: reused while `now` is inside it. */
interface Span {
  start: number;
  end: number;
}

const ordinal = (n: number): string => {
  if (n % 10 === 1 && n !== 11) return `${n}st`;
  if (n % 10 === 2 && n !== 12) return `${n}nd`;
  if (n % 10 === 3 && n !== 13) return `${n}rd`;
  return `${n}th`;
};

/**
 * A customer's billing calendar. Working a period out through Intl costs ~83 µs
 * (billing-period.ts), far too much for every request: each calendar keeps the day and the month
 * holding the last instant asked, and works them out again only once `now` leaves them (at the
 * period's end, or a test clock moved back).
 */
class BillingCalendar implements Calendar {
  readonly id: string;
  readonly utcDay: boolean;
  readonly hourShiftMs: number;
  private day: Span = { start: 0, end: 0 };
  private month: Span = { start: 0, end: 0 };

  constructor(private readonly billing: Billing) {
    this.id = `${billing.anchorDay}/${billing.timeZone}`;
    this.utcDay = billing.timeZone === 'UTC';
    // The same all year: billingProblem refuses a zone whose clocks change by less than an hour.
    this.hourShiftMs = localHourShiftMs(billing.timeZone, Date.now());
  }

  private span(name: CalendarWindowName, now: number): Span {
    if (name === 'day') {
      if (now < this.day.start || now >= this.day.end)
        this.day = toSpan(dayPeriod(new Date(now), this.billing.timeZone));
      return this.day;
    }
    // A calendar window added to windows.ts fails to compile here until this calendar knows its period.
    const month: 'month' = name;
    if (now < this.month.start || now >= this.month.end)
      this.month = toSpan(billingPeriod(new Date(now), this.billing));
    return this[month];
  }

  start(name: CalendarWindowName, now: number): number {
    if (name === 'day' && this.utcDay) return UTC_CALENDAR.start(name, now);
    return this.span(name, now).start;
  }

  end(name: CalendarWindowName, now: number): number {
    if (name === 'day' && this.utcDay) return UTC_CALENDAR.end(name, now);
    return this.span(name, now).end;
  }

  period(name: CalendarWindowName): string {
    const { anchorDay, timeZone } = this.billing;
    if (name === 'day') return this.utcDay ? 'UTC day' : `day in ${timeZone}`;
    return `billing month from the ${ordinal(anchorDay)} (${timeZone})`;
  }
}

const toSpan = (period: { start: Date; end: Date }): Span => ({
  start: period.start.getTime(),
  end: period.end.getTime(),
});

const calendars = new Map<string, Calendar>();

/**
 * The calendar of a billing setting: UTC_CALENDAR for the default (day 1, UTC), else one per
 * setting, built once. Bounded by what exists: 28 anchor days times the zones in use.
 */
export function calendarFor(billing: Billing | undefined): Calendar {
  if (!billing || (billing.anchorDay === DEFAULT_BILLING.anchorDay && billing.timeZone === DEFAULT_BILLING.timeZone)) {
    return UTC_CALENDAR;
  }
  const id = `${billing.anchorDay}/${billing.timeZone}`;
  let calendar = calendars.get(id);
  if (!calendar) {
    calendar = new BillingCalendar({ anchorDay: billing.anchorDay, timeZone: billing.timeZone });
    if (calendars.size < 20_000) calendars.set(id, calendar);
  }
  return calendar;
}
