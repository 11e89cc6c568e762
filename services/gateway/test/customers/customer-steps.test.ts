import { describe, expect, it } from 'vitest';
import { onHours, stepAt, stepSeries, stepsOf } from '../../src/customers/customer-steps.js';
import { HOUR_MS } from '../../src/usage/usage-history.js';

/** A customer's calendar steps and the hours summed into them (customers/customer-steps.ts). */

const at = (text: string) => Date.parse(text);
const iso = (ms: number) => new Date(ms).toISOString();
const PARIS = { anchorDay: 15, timeZone: 'Europe/Paris' };
const hour = (text: string, admitted: number) => ({
  hour: at(text),
  admitted,
  limited: 0,
  banned: 0,
  outOfCredits: 0,
  forbidden: 0,
  units: admitted,
  upstreamFailed: 0,
});

describe('the steps of a customer’s calendar', () => {
  it('are UTC hours, local days of 23 to 25 hours, or billing periods from the anchor day', () => {
    expect(stepAt('hour', PARIS, at('2026-03-29T01:30:00Z'))).toEqual({
      start: at('2026-03-29T01:00:00Z'),
      end: at('2026-03-29T02:00:00Z'),
    });
    const days = stepsOf('day', PARIS, at('2026-03-28T23:00:00Z'), at('2026-10-25T23:00:00Z'));
    const lengths = new Set(days.map((d) => (d.end - d.start) / HOUR_MS));
    expect([...lengths].sort()).toEqual([23, 24, 25]);
    expect(days.at(-1)).toEqual({ start: at('2026-10-24T22:00:00Z'), end: at('2026-10-25T23:00:00Z') });
    expect(
      stepsOf('period', PARIS, at('2026-10-14T22:00:00Z'), at('2026-12-14T23:00:00Z')).map((p) => iso(p.end)),
    ).toEqual(['2026-11-14T23:00:00.000Z', '2026-12-14T23:00:00.000Z']);
  });

  it('start a day at 01:00 where the clocks skip midnight, still on a whole hour', () => {
    // America/Santiago springs forward at 00:00 on 6 September 2026: the day starts at 01:00 (04:00 UTC).
    const day = stepAt('day', { anchorDay: 1, timeZone: 'America/Santiago' }, at('2026-09-06T12:00:00Z'));
    expect(iso(day.start)).toBe('2026-09-06T04:00:00.000Z');
    expect((day.end - day.start) / HOUR_MS).toBe(23);
    expect(onHours([day], { anchorDay: 1, timeZone: 'America/Santiago' })).toBe(true);
  });

  it('are local hours from :30 or :15 past the UTC hour in a zone a part-hour off UTC, and its days and periods start on one', () => {
    const india = { anchorDay: 26, timeZone: 'Asia/Kolkata' };
    expect(stepAt('hour', india, at('2026-11-25T18:29:59Z'))).toEqual({
      start: at('2026-11-25T17:30:00Z'),
      end: at('2026-11-25T18:30:00Z'),
    });
    const day = stepAt('day', india, at('2026-11-26T10:00:00Z'));
    expect(iso(day.start)).toBe('2026-11-25T18:30:00.000Z');
    expect(stepAt('hour', india, day.start).start).toBe(day.start);
    const nepal = { anchorDay: 3, timeZone: 'Asia/Kathmandu' };
    const periods = stepsOf(
      'period',
      nepal,
      stepAt('period', nepal, at('2026-10-10T00:00:00Z')).start,
      at('2026-12-02T18:15:00Z'),
    );
    expect(periods.map((p) => iso(p.start))).toEqual(['2026-10-02T18:15:00.000Z', '2026-11-02T18:15:00.000Z']);
    expect(onHours([day], india)).toBe(true);
    expect(onHours(periods, nepal)).toBe(true);
    // Newfoundland: -02:30 then -03:30 from 1 November; its 25-hour day still starts and ends on its hours.
    const stJohns = { anchorDay: 1, timeZone: 'America/St_Johns' };
    const change = stepAt('day', stJohns, at('2026-11-01T12:00:00Z'));
    expect([iso(change.start), iso(change.end)]).toEqual(['2026-11-01T02:30:00.000Z', '2026-11-02T03:30:00.000Z']);
    expect(onHours([change], stJohns)).toBe(true);
  });

  it('are not on its hours in a zone whose clocks change by half an hour, which the route refuses to sum', () => {
    // Lord Howe Island: +10:30, then +11:00 from 02:00 on 4 October 2026 (a record from before it was refused).
    const lordHowe = { anchorDay: 1, timeZone: 'Australia/Lord_Howe' };
    const days = stepsOf('day', lordHowe, at('2026-09-30T13:30:00Z'), at('2026-10-10T13:00:00Z'));
    expect(onHours(days, lordHowe)).toBe(false);
  });

  it('sum every hour into the step holding it, and leave out hours outside them', () => {
    const steps = stepsOf('day', PARIS, at('2026-03-27T23:00:00Z'), at('2026-03-29T22:00:00Z'));
    const series = stepSeries(
      [
        hour('2026-03-27T22:00:00Z', 100), // before the first step
        hour('2026-03-27T23:00:00Z', 1),
        hour('2026-03-28T22:00:00Z', 2),
        hour('2026-03-28T23:00:00Z', 4),
        hour('2026-03-29T21:00:00Z', 8),
        hour('2026-03-29T22:00:00Z', 100), // after the last
      ],
      steps,
    );
    expect(series.map((s) => [iso(s.start), s.admitted, s.units])).toEqual([
      ['2026-03-27T23:00:00.000Z', 3, 3],
      ['2026-03-28T23:00:00.000Z', 12, 12],
    ]);
  });
});
