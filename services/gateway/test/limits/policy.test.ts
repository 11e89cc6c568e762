import { describe, expect, it } from 'vitest';
import { DEFAULT_BILLING } from '../../src/limits/billing-period.js';
import { emptyWindows } from '../../src/limits/key-limiter.js';
import {
  customerPolicyFor,
  freshResetMs,
  type Limits,
  periodEnd,
  policyFor,
  windowSeconds,
} from '../../src/limits/policy.js';

// What a plan's limits become for the limiter: its windows, how each counts and how long it is,
// and when a window that starts now first gives capacity back. These are what the limiters and
// the RateLimit headers take their lengths and resets from.

const at = (iso: string) => Date.parse(iso);

describe('a limit policy', () => {
  it('has a window per limit given, shortest first, each with its length', () => {
    const policy = policyFor({ perMonth: 5_000, perSecond: 2, perDay: 1_000, perHour: 100, perMinute: 10 });
    expect(policy.shadow).toBe(false);
    expect(policy.windows.map((w) => [w.name, w.limit, w.kind, w.lengthMs, w.bucketMs, w.suffix])).toEqual([
      ['second', 2, 'fixed', 1_000, 0, 's'],
      ['minute', 10, 'fixed', 60_000, 0, 'm'],
      ['hour', 100, 'fixed', 3_600_000, 0, 'h'],
      ['day', 1_000, 'calendar', 86_400_000, 0, 'd'],
      ['month', 5_000, 'calendar', 2_592_000_000, 0, 'mo'],
    ]);
  });

  it('counts the second, minute and hour in buckets when sliding (1/50 s, 1/60 min, 1/60 h); day and month stay calendar quotas', () => {
    const policy = policyFor({ perSecond: 3, perMinute: 20, perHour: 200, perDay: 2_000, perMonth: 20_000 }, 'sliding');
    expect(policy.windows.map((w) => [w.name, w.kind, w.lengthMs, w.bucketMs, w.suffix])).toEqual([
      ['second', 'sliding', 1_000, 20, 'ss'],
      ['minute', 'sliding', 60_000, 1_000, 'ms'],
      ['hour', 'sliding', 3_600_000, 60_000, 'hs'],
      ['day', 'calendar', 86_400_000, 0, 'd'],
      ['month', 'calendar', 2_592_000_000, 0, 'mo'],
    ]);
  });

  it('is in shadow mode only when asked', () => {
    expect(policyFor({ perMinute: 7 }, 'fixed', true).shadow).toBe(true);
    expect(policyFor({ perMinute: 7 }, 'fixed', false).shadow).toBe(false);
    expect(policyFor({ perMinute: 7 }).shadow).toBe(false);
  });

  it('is its own for each distinct set of limits, algorithm and shadow mode, however often asked', () => {
    // Asked in turn, each differing from the one before in one thing only: a policy built for
    // one must never answer for another.
    const asked: Array<[Limits, 'fixed' | 'sliding', boolean]> = [
      [{ perMinute: 13 }, 'fixed', false],
      [{ perMinute: 13 }, 'fixed', true],
      [{ perMinute: 13 }, 'sliding', false],
      [{ perMinute: 13 }, 'sliding', true],
      [{ perMinute: 14 }, 'fixed', false],
      [{ perHour: 13 }, 'fixed', false],
      [{ perMinute: 13, perDay: 130 }, 'fixed', false],
      [{ perSecond: 13, perMinute: 13 }, 'fixed', false],
      [{ perMinute: 13 }, 'fixed', false],
    ];
    for (const [limits, algorithm, shadow] of asked) {
      const policy = policyFor(limits, algorithm, shadow);
      const expected = Object.entries(limits).map(([field, limit]) => [field, limit]);
      expect(policy.windows.map((w) => [`per${w.name[0]?.toUpperCase()}${w.name.slice(1)}`, w.limit])).toEqual(
        expected,
      );
      expect(policy.shadow).toBe(shadow);
      expect(policy.windows.filter((w) => w.name !== 'day').every((w) => w.kind === algorithm)).toBe(true);
    }
  });

  it('refuses limits with no window at all', () => {
    expect(() => policyFor({})).toThrow('a limit policy needs at least one window');
  });
});

describe('a calendar window’s end', () => {
  it.each([
    ['day', '2026-11-26T12:34:56.789Z', '2026-11-27T00:00:00.000Z'],
    ['day', '2026-11-26T00:00:00.000Z', '2026-11-27T00:00:00.000Z'],
    ['day', '2026-11-26T23:59:59.999Z', '2026-11-27T00:00:00.000Z'],
    ['month', '2026-11-26T12:00:00.000Z', '2026-12-01T00:00:00.000Z'],
    ['month', '2026-11-01T00:00:00.000Z', '2026-12-01T00:00:00.000Z'],
    ['month', '2026-12-31T23:59:59.999Z', '2027-01-01T00:00:00.000Z'],
  ] as const)('of the %s holding %s is %s', (name, now, end) => {
    expect(periodEnd(name, at(now))).toBe(at(end));
  });
});

describe('a window’s length as RateLimit-Policy reports it', () => {
  const [second, minute, hour, day, month] = policyFor({
    perSecond: 1,
    perMinute: 2,
    perHour: 3,
    perDay: 4,
    perMonth: 5,
  }).windows;

  it('is its length in seconds for every window but the month', () => {
    const now = at('2026-02-10T00:00:00Z');
    expect([second, minute, hour, day].map((rule) => rule && windowSeconds(rule, now))).toEqual([1, 60, 3_600, 86_400]);
  });

  it.each([
    ['2026-02-10T08:00:00Z', 28],
    ['2028-02-29T23:00:00Z', 29],
    ['2026-04-01T00:00:00Z', 30],
    ['2026-12-31T23:59:59Z', 31],
  ])('is the calendar month’s own length for the month (%s: %i days)', (now, days) => {
    expect(month && windowSeconds(month, at(now))).toBe(days * 86_400);
  });
});

describe('how long a window that starts empty now takes to give capacity back', () => {
  it('is the window’s length for a fixed window, which starts at its first request', () => {
    const [minute] = policyFor({ perMinute: 1 }).windows;
    expect(minute && freshResetMs(minute, at('2026-11-26T12:00:00.250Z'))).toBe(60_000);
  });

  it('is the time to the period’s end for a calendar window', () => {
    const [day, month] = policyFor({ perDay: 1, perMonth: 2 }).windows;
    const now = at('2026-11-30T18:00:00.000Z');
    expect(day && freshResetMs(day, now)).toBe(6 * 3_600_000);
    expect(month && freshResetMs(month, now)).toBe(6 * 3_600_000);
    expect(day && freshResetMs(day, at('2026-11-26T12:00:00.000Z'))).toBe(12 * 3_600_000);
  });

  it('is a window and the rest of the current bucket for a sliding window: its bucket leaves whole', () => {
    const [second, minute] = policyFor({ perSecond: 1, perMinute: 2 }, 'sliding').windows;
    const now = at('2026-11-26T12:00:00.250Z');
    // The minute's bucket of this request is 12:00:00 to 12:00:01; it leaves at 12:01:01.
    expect(minute && freshResetMs(minute, now)).toBe(60_750);
    // The second's bucket (20 ms) 12:00:00.240 to .260 leaves at 12:00:01.260.
    expect(second && freshResetMs(second, now)).toBe(1_010);
  });
});

describe('the windows of a refusal taken before the limiter is asked', () => {
  it('are every window of the policy, full, resetting as fresh windows would', () => {
    const now = at('2026-11-26T12:00:00.250Z');
    expect(emptyWindows(policyFor({ perMinute: 60, perDay: 1_000, perMonth: 9_000 }), now)).toEqual([
      { name: 'minute', scope: 'key', limit: 60, remaining: 60, windowSeconds: 60, resetAt: now + 60_000 },
      {
        name: 'day',
        scope: 'key',
        limit: 1_000,
        remaining: 1_000,
        windowSeconds: 86_400,
        resetAt: at('2026-11-27T00:00:00Z'),
      },
      {
        name: 'month',
        scope: 'key',
        limit: 9_000,
        remaining: 9_000,
        windowSeconds: 30 * 86_400,
        resetAt: at('2026-12-01T00:00:00Z'),
      },
    ]);
  });
});

describe('the policy of a key of a customer', () => {
  const paris = { anchorDay: 15, timeZone: 'Europe/Paris' };

  it('holds the customer’s windows and the key’s own, shortest first, the key’s before the customer’s', () => {
    const policy = customerPolicyFor({ perMinute: 300, perDay: 10_000 }, { perMinute: 50 }, 'sliding', false, paris);
    expect(policy.windows.map((w) => [w.scope, w.name, w.limit, w.kind])).toEqual([
      ['key', 'minute', 50, 'sliding'],
      ['customer', 'minute', 300, 'sliding'],
      ['customer', 'day', 10_000, 'calendar'],
    ]);
    // Built once per distinct set: the gate finds it again, another calendar is another policy.
    expect(customerPolicyFor({ perMinute: 300, perDay: 10_000 }, { perMinute: 50 }, 'sliding', false, paris)).toBe(
      policy,
    );
    expect(
      customerPolicyFor({ perMinute: 300, perDay: 10_000 }, { perMinute: 50 }, 'sliding', false, DEFAULT_BILLING),
    ).not.toBe(policy);
    expect(customerPolicyFor({ perMinute: 300 }, undefined, 'fixed', false, DEFAULT_BILLING).id).not.toBe(
      policyFor({ perMinute: 300 }).id,
    );
  });

  it.each([
    // [what, billing, instant, window, its start, its end]
    [
      'the default: the UTC day',
      DEFAULT_BILLING,
      '2027-03-28T10:00:00Z',
      'day',
      '2027-03-28T00:00:00Z',
      '2027-03-29T00:00:00Z',
    ],
    [
      'the default: the UTC month from the 1st',
      DEFAULT_BILLING,
      '2027-02-14T10:00:00Z',
      'month',
      '2027-02-01T00:00:00Z',
      '2027-03-01T00:00:00Z',
    ],
    ['a 23-hour Paris day', paris, '2027-03-28T10:00:00Z', 'day', '2027-03-27T23:00:00Z', '2027-03-28T22:00:00Z'],
    ['a 25-hour Paris day', paris, '2027-10-31T10:00:00Z', 'day', '2027-10-30T22:00:00Z', '2027-10-31T23:00:00Z'],
    [
      'a Paris billing month from the 15th',
      paris,
      '2027-02-14T22:30:00Z',
      'month',
      '2027-01-14T23:00:00Z',
      '2027-02-14T23:00:00Z',
    ],
    [
      'the next one, from its first instant',
      paris,
      '2027-02-14T23:00:00Z',
      'month',
      '2027-02-14T23:00:00Z',
      '2027-03-14T23:00:00Z',
    ],
    [
      'a UTC billing month from the 28th',
      { anchorDay: 28, timeZone: 'UTC' },
      '2027-03-01T00:00:00Z',
      'month',
      '2027-02-28T00:00:00Z',
      '2027-03-28T00:00:00Z',
    ],
  ] as const)('counts %s', (_what, billing, instant, name, start, end) => {
    const policy = customerPolicyFor({ perDay: 10, perMonth: 100 }, undefined, 'fixed', false, billing);
    const rule = policy.windows.find((w) => w.name === name);
    if (rule?.kind !== 'calendar') throw new Error(`no ${name}`);
    // Asked out of order, as replicas' clocks and tests may: each answer is its own instant's.
    for (const now of [at(instant), at(start) - 1, at(instant)]) {
      const inside = now >= at(start);
      expect(rule.calendar.end(name, now) === at(end)).toBe(inside);
    }
    expect(rule.calendar.start(name, at(instant))).toBe(at(start));
    expect(freshResetMs(rule, at(instant))).toBe(at(end) - at(instant));
    expect(windowSeconds(rule, at(instant))).toBe((at(end) - at(start)) / 1000);
  });
});
