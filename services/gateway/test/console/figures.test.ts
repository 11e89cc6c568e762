import { describe, expect, it } from 'vitest';
import {
  ahead,
  barStarts,
  barWidth,
  cidrsOf,
  limitsText,
  localDate,
  localHour,
  minutesIntoHour,
  outOfCredits,
  periodText,
  refusedPercent,
  requestsOf,
  statusOf,
  utcInstant,
  when,
} from '../../console/figures.js';
import { WINDOWS } from '../../src/limits/windows.js';

// What the console's pages compute before they draw (console/figures.js), without a browser:
// tests/console.test.ts drives the pages themselves in Chromium.

const at = (iso: string) => Date.parse(iso);

describe('times', () => {
  it('shows an instant to the second in UTC, which it names, and a dash for none', () => {
    expect(when('2026-11-26T12:34:56.789Z')).toBe('2026-11-26 12:34:56 UTC');
    expect(when('2026-11-26T12:34:56Z')).toBe('2026-11-26 12:34:56 UTC');
    expect(when(null)).toBe('—');
    expect(when(undefined)).toBe('—');
  });

  it('shows an instant on the clock of a customer’s zone, which it names', () => {
    expect(when('2026-11-26T23:34:56.789Z', 'Europe/Paris')).toBe('2026-11-27 00:34:56 Europe/Paris');
    expect(when('2026-07-01T00:00:00Z', 'Europe/Paris')).toBe('2026-07-01 02:00:00 Europe/Paris');
    expect(when('2026-11-26T12:00:00Z', 'Asia/Kolkata')).toBe('2026-11-26 17:30:00 Asia/Kolkata');
    expect(when(null, 'Asia/Kolkata')).toBe('—');
  });

  it('names an hour of the history on the zone’s clock, with its minutes where they are not 00', () => {
    expect(localHour('2026-11-26T23:00:00.000Z', 'Europe/Paris')).toBe('2026-11-27 00h');
    expect(localHour('2026-11-26T12:00:00.000Z', 'UTC')).toBe('2026-11-26 12h');
    expect(localHour('2026-11-26T12:00:00.000Z', 'Asia/Kolkata')).toBe('2026-11-26 17:30');
  });

  it('says whether an instant is still to come', () => {
    const now = at('2026-11-26T12:00:00Z');
    expect(ahead('2026-11-26T12:00:00.001Z', now)).toBe(true);
    expect(ahead('2026-11-26T12:00:00Z', now)).toBe(false);
    expect(ahead(null, now)).toBe(false);
    expect(ahead('', now)).toBe(false);
  });

  it('reads a datetime-local field as UTC, with or without seconds', () => {
    expect(utcInstant('2026-12-01T09:30')).toBe('2026-12-01T09:30:00.000Z');
    expect(utcInstant('2026-12-01T09:30:15')).toBe('2026-12-01T09:30:15.000Z');
  });
});

describe('a customer’s calendar', () => {
  it('names the day an instant falls on in its zone, not in UTC', () => {
    // Paris's midnight of the 27th is 23:00 UTC on the 26th.
    expect(localDate('2026-11-26T23:00:00.000Z', 'Europe/Paris')).toBe('2026-11-27');
    expect(localDate('2026-11-26T23:00:00.000Z', 'UTC')).toBe('2026-11-26');
    expect(localDate('2026-11-27T04:59:59.000Z', 'America/New_York')).toBe('2026-11-26');
  });

  it('writes a period as its first and last local day, whatever the clocks did in between', () => {
    // From the 15th of October (summer time, +02:00) to the 15th of November (+01:00).
    expect(periodText('2026-10-14T22:00:00.000Z', '2026-11-14T23:00:00.000Z', 'Europe/Paris')).toBe(
      '2026-10-15 to 2026-11-14',
    );
    expect(periodText('2026-11-01T00:00:00.000Z', '2026-12-01T00:00:00.000Z', 'UTC')).toBe('2026-11-01 to 2026-11-30');
  });
});

describe('a key', () => {
  const now = at('2026-11-26T12:00:00Z');
  const key = {};

  it('is revoked, expired, banned or active: the first that applies', () => {
    expect(statusOf(key, now)).toBe('active');
    expect(statusOf({ ...key, bannedUntil: '2026-11-26T13:00:00Z' }, now)).toBe('banned');
    expect(statusOf({ ...key, expiresAt: '2026-11-26T12:00:00Z', bannedUntil: 'x' }, now)).toBe('expired');
    expect(statusOf({ ...key, expiresAt: '2026-11-26T12:00:01Z' }, now)).toBe('active');
    expect(statusOf({ ...key, revokedAt: '2026-11-25T00:00:00Z', expiresAt: '2026-11-01T00:00:00Z' }, now)).toBe(
      'revoked',
    );
  });

  it('writes its limits in the order given with the units of the windows table', () => {
    expect(limitsText({ perMinute: 60, perDay: 1_000 }, WINDOWS)).toBe('60/min, 1000/day');
    expect(limitsText({ perMonth: 5, perSecond: 2 }, WINDOWS)).toBe('5/month, 2/s');
    expect(limitsText({ perFortnight: 3 }, WINDOWS)).toBe('3/perFortnight');
    expect(limitsText(null, WINDOWS)).toBe('');
  });

  it('takes addresses one per line, or apart by commas or spaces; none is null', () => {
    expect(cidrsOf('10.0.0.0/8\n192.0.2.1, 2001:db8::/32  ')).toEqual(['10.0.0.0/8', '192.0.2.1', '2001:db8::/32']);
    expect(cidrsOf(' \n ')).toBeNull();
    expect(cidrsOf(null)).toBeNull();
  });
});

describe('the overview’s totals', () => {
  it('counts every decision as a request, and the share refused in whole percent', () => {
    const totals = { admitted: 160, refused: 25, outOfCredits: 10, forbidden: 5 };
    expect(requestsOf(totals)).toBe(200);
    // The share of 429s: the 402s are requests, not refusals by a limit or a ban.
    expect(refusedPercent(totals)).toBe(13);
    expect(refusedPercent({ admitted: 2, refused: 1, outOfCredits: 0, forbidden: 0 })).toBe(33);
  });

  it('tells a balance that pays for no request from one that does, and from no credit terms', () => {
    const terms = { refill: { amount: 100, every: 'period' } };
    expect(outOfCredits({ credits: terms, balance: 0 })).toBe(true);
    expect(outOfCredits({ credits: {}, balance: 0 })).toBe(true);
    expect(outOfCredits({ credits: terms, balance: 1 })).toBe(false);
    // Without terms its keys spend nothing: a balance of 0 refuses nothing.
    expect(outOfCredits({ credits: null, balance: 0 })).toBe(false);
    expect(outOfCredits(null)).toBe(false);
  });

  it('has no figures before the totals are in, and no share of no requests', () => {
    expect(requestsOf(undefined)).toBeNull();
    expect(refusedPercent(undefined)).toBeNull();
    expect(refusedPercent({ admitted: 0, refused: 0, outOfCredits: 0, forbidden: 0 })).toBeNull();
  });

  it('rates this hour per minute gone, at least one', () => {
    expect(minutesIntoHour(at('2026-11-26T12:30:00Z'))).toBe(30);
    expect(minutesIntoHour(at('2026-11-26T12:00:20Z'))).toBe(1);
  });
});

describe('the bars of an hourly chart', () => {
  it('share 80 % of an hour, each at least the narrowest drawn', () => {
    expect(barWidth(100, 2, 5)).toEqual({ px: 40, seconds: 1_440 });
    // A week of hours on a phone: 2 px an hour, so each bar is the narrowest, wider than its hour.
    expect(barWidth(2, 3, 5)).toEqual({ px: 5, seconds: 9_000 });
  });

  it('of a day (a customer\u2019s billing period by day) are sized in the day\u2019s seconds', () => {
    // 40 px a day, 3 series: together 80 % of it, each 32/3 px, a third of 80 % of 86,400 s.
    const { px, seconds } = barWidth(40, 3, 5, 86_400);
    expect(px).toBeCloseTo(32 / 3);
    expect(seconds).toBeCloseTo(23_040);
    // 10 days on a phone at 6 px a day: each bar the narrowest, 5 px, five sixths of a day.
    expect(barWidth(6, 2, 5, 86_400)).toEqual({ px: 5, seconds: 72_000 });
  });

  it('stand side by side, centred on their hour', () => {
    const hours = [0, 3_600];
    expect(barStarts(hours, 0, 2, 600)).toEqual([-600, 3_000]);
    expect(barStarts(hours, 1, 2, 600)).toEqual([0, 3_600]);
    expect(barStarts(hours, 1, 3, 600)).toEqual([-300, 3_300]);
  });
});
