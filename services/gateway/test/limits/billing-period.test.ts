import { describe, expect, it } from 'vitest';
import {
  billingPeriod,
  billingProblem,
  DEFAULT_BILLING,
  dayPeriod,
  ianaTimeZone,
  localHourShiftMs,
  type Period,
  previousBillingPeriod,
  startOfLocalDay,
} from '../../src/limits/billing-period.js';

const iso = (p: Period) => [p.start.toISOString(), p.end.toISOString()];
const hours = (p: Period) => (p.end.getTime() - p.start.getTime()) / 3_600_000;

describe('billing periods', () => {
  it('defaults to calendar months in UTC, as keys without a customer have today', () => {
    expect(iso(billingPeriod(new Date('2026-11-26T18:00:00Z'), DEFAULT_BILLING))).toEqual([
      '2026-11-01T00:00:00.000Z',
      '2026-12-01T00:00:00.000Z',
    ]);
  });

  it('runs from the anchor day at local midnight, across a change of offset', () => {
    // Paris is UTC+2 until 25 October 2026 and UTC+1 after.
    const period = billingPeriod(new Date('2026-11-10T12:00:00Z'), { anchorDay: 15, timeZone: 'Europe/Paris' });
    expect(iso(period)).toEqual(['2026-10-14T22:00:00.000Z', '2026-11-14T23:00:00.000Z']);
  });

  it('puts the anchor instant itself in the new period and the millisecond before it in the old', () => {
    const billing = { anchorDay: 15, timeZone: 'Europe/Paris' };
    const start = new Date('2026-11-14T23:00:00Z');
    expect(billingPeriod(start, billing).start).toEqual(start);
    expect(billingPeriod(new Date(start.getTime() - 1), billing).end).toEqual(start);
  });

  it('keeps the anchor day in February and in 30-day months (28 is the highest anchor)', () => {
    const billing = { anchorDay: 28, timeZone: 'UTC' };
    expect(iso(billingPeriod(new Date('2026-02-28T00:00:00Z'), billing))).toEqual([
      '2026-02-28T00:00:00.000Z',
      '2026-03-28T00:00:00.000Z',
    ]);
    expect(iso(billingPeriod(new Date('2026-02-27T23:59:59Z'), billing))).toEqual([
      '2026-01-28T00:00:00.000Z',
      '2026-02-28T00:00:00.000Z',
    ]);
  });

  it('rolls over the year on an anchor in December and January', () => {
    expect(iso(billingPeriod(new Date('2027-01-03T00:00:00Z'), { anchorDay: 5, timeZone: 'UTC' }))).toEqual([
      '2026-12-05T00:00:00.000Z',
      '2027-01-05T00:00:00.000Z',
    ]);
  });

  it('gives the period before, for previous-period reports', () => {
    const billing = { anchorDay: 3, timeZone: 'America/New_York' };
    expect(iso(previousBillingPeriod(new Date('2026-03-10T12:00:00Z'), billing))).toEqual([
      '2026-02-03T05:00:00.000Z',
      '2026-03-03T05:00:00.000Z',
    ]);
  });

  it('counts a local day of the customer zone, not of the gateway', () => {
    // 02:00 UTC on the 27th is still the 26th in New York.
    expect(iso(dayPeriod(new Date('2026-11-27T02:00:00Z'), 'America/New_York'))).toEqual([
      '2026-11-26T05:00:00.000Z',
      '2026-11-27T05:00:00.000Z',
    ]);
  });
});

describe('days with daylight-saving changes', () => {
  it('has 23 hours on the spring day and 25 on the autumn day (New York)', () => {
    expect(hours(dayPeriod(new Date('2026-03-08T12:00:00Z'), 'America/New_York'))).toBe(23);
    expect(hours(dayPeriod(new Date('2026-11-01T12:00:00Z'), 'America/New_York'))).toBe(25);
    expect(hours(dayPeriod(new Date('2026-11-02T12:00:00Z'), 'America/New_York'))).toBe(24);
  });

  it('starts at 01:00 where the clocks skip midnight (Santiago, September)', () => {
    const day = dayPeriod(new Date('2026-09-06T12:00:00Z'), 'America/Santiago');
    expect(iso(day)).toEqual(['2026-09-06T04:00:00.000Z', '2026-09-07T03:00:00.000Z']);
    expect(hours(day)).toBe(23);
    // The day before ends where this one starts: no instant belongs to neither.
    expect(dayPeriod(new Date('2026-09-05T12:00:00Z'), 'America/Santiago').end).toEqual(day.start);
  });

  it('has 23½ hours where the change is half an hour (Lord Howe Island)', () => {
    expect(hours(dayPeriod(new Date('2026-10-04T12:00:00Z'), 'Australia/Lord_Howe'))).toBe(23.5);
  });

  it('finds local midnight in zones ahead of and behind UTC by more than 12 hours', () => {
    expect(startOfLocalDay({ year: 2026, month: 11, day: 26 }, 'Pacific/Kiritimati').toISOString()).toBe(
      '2026-11-25T10:00:00.000Z',
    );
    expect(startOfLocalDay({ year: 2026, month: 11, day: 26 }, 'Pacific/Pago_Pago').toISOString()).toBe(
      '2026-11-26T11:00:00.000Z',
    );
  });
});

describe('where a zone’s local hours start past the UTC hour', () => {
  it.each([
    ['UTC', '2026-11-26T12:00:00Z', 0],
    ['Europe/Paris', '2026-07-01T12:00:00Z', 0],
    ['Asia/Kolkata', '2026-11-26T12:00:00Z', 30],
    ['Asia/Kathmandu', '2026-11-26T12:00:00Z', 15],
    ['Pacific/Chatham', '2026-11-26T12:00:00Z', 15],
    // -03:30 in winter and -02:30 in summer: its hours start at :30 all year.
    ['America/St_Johns', '2026-01-15T12:00:00Z', 30],
    ['America/St_Johns', '2026-07-15T12:00:00Z', 30],
    ['Australia/Adelaide', '2026-01-15T12:00:00Z', 30],
    ['Australia/Adelaide', '2026-07-15T12:00:00Z', 30],
  ])('%s at %s: %i minutes', (timeZone, at, minutes) => {
    expect(localHourShiftMs(timeZone, Date.parse(at))).toBe(minutes * 60_000);
  });
});

describe('billing settings a client sends', () => {
  it.each([
    [{ anchorDay: 1, timeZone: 'UTC' }, null],
    [{ anchorDay: 28, timeZone: 'Europe/Paris' }, null],
    [{ timeZone: 'utc' }, null],
    [{ anchorDay: 29 }, 'anchorDay'],
    [{ anchorDay: 31 }, 'anchorDay'],
    [{ anchorDay: 0 }, 'anchorDay'],
    [{ anchorDay: 1.5 }, 'anchorDay'],
    [{ anchorDay: '1' }, 'anchorDay'],
    [{ timeZone: 'Mars/Olympus_Mons' }, 'timeZone'],
    [{ timeZone: '' }, 'timeZone'],
    [{ timeZone: 42 }, 'timeZone'],
    // Offsets are no IANA names (some runtimes take them as zones): no daylight-saving rules.
    [{ timeZone: '+05:00' }, 'timeZone'],
    [{ timeZone: '-03:30' }, 'timeZone'],
    [{ timeZone: 'UTC+05:00' }, 'timeZone'],
    // A part-hour off UTC: the history keeps their customers' hours from their local hour.
    [{ timeZone: 'Asia/Kolkata' }, null],
    [{ timeZone: 'Asia/Kathmandu' }, null],
    [{ timeZone: 'America/St_Johns' }, null],
    [{ timeZone: 'Australia/Adelaide' }, null],
    [{ timeZone: 'Pacific/Chatham' }, null],
    // Its clocks change by half an hour: its local hours do not start the same minutes past the UTC hour all year.
    [{ timeZone: 'Australia/Lord_Howe' }, 'timeZone'],
  ])('%j → problem naming %s', (billing, field) => {
    const problem = billingProblem(billing);
    if (field === null) expect(problem).toBeNull();
    else expect(problem).toContain(`billing.${field}`);
  });

  it('refuses a zone whose clocks change by less than an hour, naming its offsets and why', () => {
    expect(billingProblem({ timeZone: 'Australia/Lord_Howe' })).toMatch(
      /^billing\.timeZone Australia\/Lord_Howe is \+10:30 or \+11:00 from UTC by the season: .*kept per local hour.*could not be summed exactly/,
    );
  });

  it('stores a zone under the IANA name given, its case corrected', () => {
    expect(ianaTimeZone('utc')).toBe('UTC');
    expect(ianaTimeZone('UTC')).toBe('UTC');
    expect(ianaTimeZone('europe/paris')).toBe('Europe/Paris');
    expect(ianaTimeZone('Nowhere/Special')).toBeNull();
  });

  it.each(['Asia/Kolkata', 'Asia/Calcutta', 'Asia/Kathmandu', 'Europe/Kyiv', 'Etc/GMT+5', 'America/Port-au-Prince'])(
    'keeps %s as given, never the name the runtime links it to',
    (zone) => {
      expect(ianaTimeZone(zone)).toBe(zone);
    },
  );

  it('the refusal of an offset says to give an IANA zone name', () => {
    expect(billingProblem({ timeZone: '+05:00' })).toMatch(/^billing\.timeZone must be an IANA time zone name/);
  });
});
