import type { LightMyRequestResponse } from 'fastify';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { MemoryCustomerStore } from '../../../src/customers/memory-customer-store.js';
import { MemoryKeyStore } from '../../../src/keys/memory-key-store.js';
import { ADMIN_TOKEN, bearer, type TestGateway, useGateways } from '../../support/helpers.js';
import { type TestClock, testClockFrom } from '../../support/test-clock.js';

/*
 * Customers in zones a part-hour off UTC (India +05:30, Nepal +05:45, Newfoundland -03:30/-02:30,
 * South Australia +09:30/+10:30), through the limiter on a test clock, on two replicas of one
 * Redis and on the embedded limiter: their day and month windows reset at local midnight and on
 * the anchor day, and their history sums exactly into their local hours, days and billing
 * periods, equal to the sum of their keys'. The requests either side of midnight fall in one UTC
 * hour, which a history kept by UTC hour could not split.
 *
 * The clock runs ahead of the real one (Redis expires a window at its period's end by its own
 * clock), Redis's TTLs aging with it (test-clock.ts), and the expected boundaries come from the
 * zones' offsets as Intl reads them, not from the gateway's calendar code.
 */

const gateways = useGateways();
const admin = bearer(ADMIN_TOKEN);
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const iso = (ms: number) => new Date(ms).toISOString();

/** The zone's offset from UTC at an instant, in minutes (east positive). */
function offsetAt(timeZone: string, at: number): number {
  const parts = new Intl.DateTimeFormat('en-US', { timeZone, timeZoneName: 'longOffset' }).formatToParts(at);
  const name = parts.find((p) => p.type === 'timeZoneName')?.value ?? 'GMT';
  const match = /^GMT([+-])(\d{2}):(\d{2})$/.exec(name);
  if (!match) return 0;
  const minutes = Number(match[2]) * 60 + Number(match[3]);
  return match[1] === '-' ? -minutes : minutes;
}

/** The local date (YYYY-MM-DD) of an instant at an offset. */
const localDate = (at: number, offset: number) => iso(at + offset * MINUTE).slice(0, 10);

/** The first local midnight after `after` in a zone of a fixed offset whose date can be an anchor day (≤ 28). */
function nextAnchorMidnight(offset: number, after: number): number {
  let midnight = Math.ceil((after + offset * MINUTE) / DAY) * DAY - offset * MINUTE;
  while (Number(localDate(midnight, offset).slice(8)) > 28) midnight += DAY;
  return midnight;
}

/** The zone's next change of offset after `after` (to the minute), with the offsets either side. */
function nextChange(timeZone: string, after: number): { at: number; before: number; after: number } {
  let t = Math.ceil(after / HOUR) * HOUR;
  const before = offsetAt(timeZone, t);
  while (offsetAt(timeZone, t) === before) {
    t += HOUR;
    if (t > after + 400 * DAY) throw new Error(`${timeZone} does not change its clocks`);
  }
  let low = t - HOUR;
  while (t - low > MINUTE) {
    const mid = low + Math.floor((t - low) / 2 / MINUTE) * MINUTE;
    if (offsetAt(timeZone, mid) === before) low = mid;
    else t = mid;
  }
  return { at: t, before, after: offsetAt(timeZone, t) };
}

function get(gw: TestGateway, url: string): Promise<LightMyRequestResponse> {
  return gw.admin.inject({ method: 'GET', url, headers: admin });
}

async function post(gw: TestGateway, url: string, payload: object): Promise<{ id: string; key?: string }> {
  const res = await gw.admin.inject({ method: 'POST', url, headers: admin, payload });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

interface Step {
  start: string;
  end: string;
  admitted: number;
  limited: number;
  units: number;
}

async function history(gw: TestGateway, url: string): Promise<{ totals: Record<string, number>; series: Step[] }> {
  const res = await get(gw, url);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

const rows = (body: { series: Step[] }) => body.series.map((s) => [s.start, s.end, s.admitted, s.limited]);

/** One or two gateways (two replicas of one Redis, or the embedded limiter) on one test clock. */
async function replicas(backend: 'redis' | 'memory', clock: TestClock) {
  const keyStore = new MemoryKeyStore();
  const customerStore = new MemoryCustomerStore();
  const prefix = `lh${Date.now()}${Math.random().toString(36).slice(2, 6)}:`;
  const make = () =>
    gateways.start({
      prefix,
      keyStore,
      customerStore,
      now: clock.now,
      ...(backend === 'memory' ? { redisUrl: null } : {}),
      env: { BAN_THRESHOLD: '1000', REDIS_COMMAND_TIMEOUT_MS: '2000' },
    });
  const a = await make();
  if (a.redis) clock.ages({ client: a.redis as Redis, prefix });
  return { a, b: backend === 'memory' ? a : await make() };
}

/** `n` requests at once, spread over the keys and replicas: the statuses, and a 429's Retry-After. */
async function send(
  gws: TestGateway[],
  keys: string[],
  n: number,
): Promise<{ ok: number; limited: number; retryAfter: Set<string> }> {
  const answers = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      (gws[i % gws.length] as TestGateway).app.inject({
        url: '/v1/pets',
        headers: bearer(keys[i % keys.length] as string),
      }),
    ),
  );
  const limited = answers.filter((r) => r.statusCode === 429);
  return {
    ok: answers.filter((r) => r.statusCode === 200).length,
    limited: limited.length,
    retryAfter: new Set(limited.map((r) => String(r.headers['retry-after']))),
  };
}

describe('a customer in a zone a part-hour off UTC, through the limiter', () => {
  it.each([
    ['Asia/Kolkata', 'redis'],
    ['Asia/Kolkata', 'memory'],
    ['Asia/Kathmandu', 'redis'],
    ['Asia/Kathmandu', 'memory'],
  ] as const)(
    '%s: day and month reset at local midnight, history exact by local hour, day and period (%s)',
    async (timeZone, backend) => {
      const offset = offsetAt(timeZone, Date.now());
      // A local midnight a day or more ahead, on a date that can be an anchor day.
      const midnight = nextAnchorMidnight(offset, Date.now() + DAY);
      const clock = testClockFrom(midnight - 10 * MINUTE);
      // Ten minutes either side of midnight: the same UTC hour (18:20 and 18:40 UTC in India).
      expect(Math.floor((midnight - 10 * MINUTE) / HOUR)).toBe(Math.floor((midnight + 10 * MINUTE) / HOUR));
      const { a, b } = await replicas(backend, clock);
      const anchorDay = Number(localDate(midnight, offset).slice(8));
      const billing = { anchorDay, timeZone };
      const daily = await post(a, '/admin/customers', {
        name: 'Daily',
        plan: 'pro',
        limits: { perMinute: 4, perDay: 4 },
        billing,
      });
      const monthly = await post(a, '/admin/customers', {
        name: 'Monthly',
        plan: 'pro',
        limits: { perMinute: 3, perDay: 3, perMonth: 3 },
        billing,
      });
      const dailyKeys = [
        await post(a, '/admin/keys', { customerId: daily.id, name: 'prod' }),
        await post(a, '/admin/keys', { customerId: daily.id, name: 'ci' }),
      ];
      const monthlyKey = await post(a, '/admin/keys', { customerId: monthly.id, name: 'app' });

      for (const at of [midnight - 10 * MINUTE, midnight + 10 * MINUTE]) {
        await clock.moveTo(at);
        const day = await send(
          [a, b],
          dailyKeys.map((k) => k.key as string),
          6,
        );
        const month = await send([a, b], [monthlyKey.key as string], 5);
        expect([day.ok, day.limited, month.ok, month.limited], iso(at)).toEqual([4, 2, 3, 2]);
        // Before midnight, both windows end at local midnight: ten minutes on.
        if (at < midnight) expect([...day.retryAfter, ...month.retryAfter]).toEqual(['600', '600']);
      }

      await clock.moveTo(midnight + 40 * MINUTE);
      const url = (id: string, query: string) => `/admin/customers/${id}/usage/history?${query}`;
      const days = await history(
        b,
        url(daily.id, `granularity=day&from=${localDate(midnight - DAY, offset)}&to=${localDate(midnight, offset)}`),
      );
      expect(rows(days)).toEqual([
        [iso(midnight - DAY), iso(midnight), 4, 2],
        [iso(midnight), iso(midnight + DAY), 4, 2],
      ]);
      // Its hours are its local hours: from :30 (India) or :15 past the UTC hour (Nepal's +05:45).
      const hours = await history(a, url(daily.id, `granularity=hour&from=${iso(midnight - HOUR)}`));
      expect(rows(hours)).toEqual([
        [iso(midnight - HOUR), iso(midnight), 4, 2],
        [iso(midnight), iso(midnight + HOUR), 4, 2],
      ]);
      const csv = await get(a, `${url(daily.id, `granularity=day&from=${localDate(midnight, offset)}`)}&format=csv`);
      expect(csv.body.trim().split('\n').at(-1)).toBe(`${iso(midnight)},${iso(midnight + DAY)},4,2,0,2,0,4,0,0`);
      const current = await history(b, url(monthly.id, 'granularity=period&period=current'));
      expect(current.series.map((s) => [s.start, s.admitted, s.limited])).toEqual([[iso(midnight), 3, 2]]);
      const previous = await history(b, url(monthly.id, 'granularity=period&period=previous'));
      expect(previous.series.at(-1)).toMatchObject({ end: iso(midnight), admitted: 3, limited: 2 });

      // The customer's history is the sum of its keys' (theirs in UTC hours, each hour where it starts).
      const perKey = await Promise.all(
        dailyKeys.map(
          async (k) => (await history(a, `/admin/keys/${k.id}/usage/history?from=${iso(midnight - 2 * HOUR)}`)).totals,
        ),
      );
      const own = (await history(a, url(daily.id, `granularity=hour&from=${iso(midnight - 2 * HOUR)}`))).totals;
      for (const name of ['admitted', 'limited', 'banned', 'outOfCredits', 'forbidden', 'units', 'upstreamFailed']) {
        expect(own[name], name).toBe(perKey.reduce((n, t) => n + (t[name] ?? 0), 0));
      }
      const top = (await get(a, '/admin/usage?window=24h')).json();
      expect(
        top.customers
          .map((c: { id: string; admitted: number; limited: number }) => [c.id, c.admitted, c.limited])
          .sort(),
      ).toEqual(
        [
          [daily.id, 8, 4],
          [monthly.id, 6, 4],
        ].sort(),
      );
    },
  );
});

describe('a customer in a zone a part-hour off UTC with daylight saving, through the limiter', () => {
  it.each([
    ['America/St_Johns', 'redis'],
    ['America/St_Johns', 'memory'],
    ['Australia/Adelaide', 'redis'],
    ['Australia/Adelaide', 'memory'],
  ] as const)(
    '%s: the day of its next change is 23 or 25 of its hours, summed exactly (%s)',
    async (timeZone, backend) => {
      const change = nextChange(timeZone, Date.now() + DAY);
      // The local day of the change: from midnight at the old offset to midnight at the new one.
      const dayStart = change.at - ((change.at + change.before * MINUTE) % DAY);
      const dayEnd = dayStart + DAY - (change.after - change.before) * MINUTE;
      expect([23, 25]).toContain((dayEnd - dayStart) / HOUR);
      const clock = testClockFrom(dayStart - MINUTE);
      const { a, b } = await replicas(backend, clock);
      const anchorDay = Number(localDate(dayStart, change.before).slice(8));
      const customer = await post(a, '/admin/customers', {
        name: 'Seasons',
        plan: 'pro',
        limits: { perMinute: 3, perDay: 3 },
        billing: { anchorDay, timeZone },
      });
      const key = (await post(a, '/admin/keys', { customerId: customer.id, name: 'app' })).key as string;
      const at = async (ms: number, n: number) => {
        await clock.moveTo(ms);
        return send([a, b], [key], n);
      };
      expect((await at(dayStart - MINUTE, 1)).ok).toBe(1);
      expect((await at(dayStart + MINUTE, 2)).ok).toBe(2);
      expect((await at(change.at - MINUTE, 1)).ok).toBe(1);
      const after = await at(change.at + MINUTE, 1);
      // Refused until the local midnight after the change, at the new offset.
      expect([after.ok, [...after.retryAfter]]).toEqual([0, [String((dayEnd - change.at - MINUTE) / 1000)]]);
      expect((await at(dayEnd - MINUTE, 1)).limited).toBe(1);
      expect((await at(dayEnd + MINUTE, 1)).ok).toBe(1);

      await clock.moveTo(dayEnd + 2 * MINUTE);
      const url = (query: string) => `/admin/customers/${customer.id}/usage/history?${query}`;
      const days = await history(b, url(`granularity=day&from=${iso(dayStart - MINUTE)}`));
      expect(rows(days)).toEqual([
        [iso(dayStart - DAY), iso(dayStart), 1, 0],
        [iso(dayStart), iso(dayEnd), 3, 2],
        [iso(dayEnd), iso(dayEnd + DAY), 1, 0],
      ]);
      // Every hour of the day starts half an hour past the UTC hour, before the change and after.
      const hours = await history(a, url(`granularity=hour&from=${iso(dayStart)}&to=${iso(dayEnd - 1)}`));
      expect(hours.series).toHaveLength((dayEnd - dayStart) / HOUR);
      expect(new Set(hours.series.map((s) => s.start.slice(13)))).toEqual(new Set([':30:00.000Z']));
      expect(hours.totals).toMatchObject({ admitted: 3, limited: 2 });
      const periods = await history(a, url('granularity=period&period=current'));
      expect(periods.series.map((s) => [s.start, s.admitted, s.limited])).toEqual([[iso(dayStart), 4, 2]]);
    },
  );
});
