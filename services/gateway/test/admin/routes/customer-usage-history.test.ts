import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { HOUR_MS } from '../../../src/usage/usage-history.js';
import { expectError } from '../../support/admin.js';
import { ADMIN_TOKEN, bearer, type TestGateway, useGateways } from '../../support/helpers.js';

/*
 * GET /admin/customers/:id/usage/history: a customer's usage by UTC hour, local day or billing
 * period. The history is seeded as the shared limiter writes a customer's hours (under its own
 * id, `history.count(customerId, …)`: the same hash as a key's). Days and periods on a fixed
 * clock in the embedded history (Redis would expire a hash of March at once by its real clock);
 * hours, CSV and 503 on Redis too.
 */

const gateways = useGateways();
const admin = bearer(ADMIN_TOKEN);
const iso = (ms: number) => new Date(ms).toISOString();
const at = (text: string) => Date.parse(text);

async function start(now: number, options: { redis?: boolean; env?: Record<string, string> } = {}) {
  let clock = now;
  const gw = await gateways.start({
    ...(options.redis ? {} : { redisUrl: null }),
    now: () => clock,
    env: { REDIS_COMMAND_TIMEOUT_MS: '2000', ...options.env },
  });
  return { gw, setNow: (ms: number) => (clock = ms) };
}

function get(gw: TestGateway, url: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return gw.admin.inject({ method: 'GET', url, headers: { ...admin, ...headers } });
}

async function customer(gw: TestGateway, billing?: { anchorDay?: number; timeZone?: string }): Promise<string> {
  const res = await gw.admin.inject({
    method: 'POST',
    url: '/admin/customers',
    headers: admin,
    payload: { name: 'Acme', plan: 'pro', ...(billing ? { billing } : {}) },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().id;
}

/** Admitted requests of `units` each, at each instant. */
function seed(gw: TestGateway, id: string, instants: string[], units = 1): void {
  for (const instant of instants) gw.deps.history.count(id, 'admitted', units, at(instant));
}

async function history(gw: TestGateway, id: string, query: string) {
  const res = await get(gw, `/admin/customers/${id}/usage/history?${query}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as {
    from: string;
    to: string;
    granularity: string;
    totals: Record<string, number>;
    series: Array<{ start: string; end: string; admitted: number; units: number }>;
  };
}

const steps = (body: Awaited<ReturnType<typeof history>>) => body.series.map((s) => [s.start, s.end, s.admitted]);

describe('a customer’s history by UTC hour', () => {
  it.each(['memory', 'redis'] as const)(
    'sums its hours, a `to` inside an hour included, JSON and CSV (%s)',
    async (backend) => {
      // Redis: an hour of today's, so the day's hash lives by Redis's real clock.
      const hour = Math.floor(Date.now() / HOUR_MS) * HOUR_MS - 2 * HOUR_MS;
      const { gw } = await start(hour + 2 * HOUR_MS + 600_000, { redis: backend === 'redis' });
      const id = await customer(gw);
      seed(gw, id, [iso(hour + 1), iso(hour + HOUR_MS - 1)], 3);
      seed(gw, id, [iso(hour + HOUR_MS + 5)]);
      gw.deps.history.count(id, 'limited', 0, hour + 10);
      const body = await history(gw, id, `from=${iso(hour)}&to=${iso(hour + HOUR_MS + 1)}`);
      expect(body.to).toBe(iso(hour + 2 * HOUR_MS));
      expect(steps(body)).toEqual([
        [iso(hour), iso(hour + HOUR_MS), 2],
        [iso(hour + HOUR_MS), iso(hour + 2 * HOUR_MS), 1],
      ]);
      expect(body.totals).toMatchObject({ admitted: 3, units: 7, limited: 1, refused: 1 });
      const csv = await get(
        gw,
        `/admin/customers/${id}/usage/history?from=${iso(hour)}&to=${iso(hour + HOUR_MS + 1)}`,
        {
          accept: 'text/csv',
        },
      );
      expect(csv.headers['content-type']).toBe('text/csv; charset=utf-8');
      expect(csv.headers['content-disposition']).toMatch(new RegExp(`^attachment; filename="usage-${id}-`));
      expect(csv.body.trim().split('\n')).toEqual([
        'start,end,admitted,limited,banned,refused,forbidden,units,upstreamFailed,outOfCredits',
        `${iso(hour)},${iso(hour + HOUR_MS)},2,1,0,1,0,6,0,0`,
        `${iso(hour + HOUR_MS)},${iso(hour + 2 * HOUR_MS)},1,0,0,0,0,1,0,0`,
      ]);
    },
  );
});

describe('a customer’s history by local day', () => {
  it('has a 23-hour day when Paris springs forward, each hour in the local day it belongs to', async () => {
    const { gw } = await start(at('2026-03-30T10:00:00Z'));
    const id = await customer(gw, { timeZone: 'Europe/Paris' });
    // 23:30 on the 28th (Paris +1), midnight and 23:59 on the 29th (+1, then +2 from 03:00), 00:00 on the 30th.
    seed(gw, id, ['2026-03-28T22:30:00Z', '2026-03-28T23:00:00Z', '2026-03-29T21:59:59Z', '2026-03-29T22:00:00Z']);
    const body = await history(gw, id, 'granularity=day&from=2026-03-28&to=2026-03-29');
    expect(steps(body)).toEqual([
      ['2026-03-27T23:00:00.000Z', '2026-03-28T23:00:00.000Z', 1],
      ['2026-03-28T23:00:00.000Z', '2026-03-29T22:00:00.000Z', 2],
    ]);
    expect(body.totals.admitted).toBe(3);
    // A `to` inside the 30th's first hour includes the 30th, which ends with the day holding now.
    const through = await history(gw, id, 'granularity=day&from=2026-03-29&to=2026-03-29T22:00:01Z');
    expect(steps(through).at(-1)).toEqual(['2026-03-29T22:00:00.000Z', '2026-03-30T22:00:00.000Z', 1]);
  });

  it('has a 25-hour day when Paris falls back', async () => {
    const { gw } = await start(at('2026-10-26T10:00:00Z'));
    const id = await customer(gw, { timeZone: 'Europe/Paris' });
    seed(gw, id, ['2026-10-24T21:59:00Z', '2026-10-24T22:00:00Z', '2026-10-25T22:30:00Z', '2026-10-25T23:00:00Z']);
    const body = await history(gw, id, 'granularity=day&from=2026-10-24&to=2026-10-25T23:00:00Z');
    expect(steps(body)).toEqual([
      ['2026-10-23T22:00:00.000Z', '2026-10-24T22:00:00.000Z', 1],
      ['2026-10-24T22:00:00.000Z', '2026-10-25T23:00:00.000Z', 2],
    ]);
  });

  it('answers the last 30 local days by default, the day holding now the last', async () => {
    const { gw } = await start(at('2026-11-03T10:00:00Z'));
    const id = await customer(gw, { timeZone: 'America/New_York' });
    const body = await history(gw, id, 'granularity=day');
    expect(body.series).toHaveLength(30);
    // 1 November, the day New York falls back: 25 hours.
    const fallBack = body.series.find((s) => s.start === '2026-11-01T04:00:00.000Z');
    expect(fallBack?.end).toBe('2026-11-02T05:00:00.000Z');
    expect(body.to).toBe('2026-11-04T05:00:00.000Z');
  });
});

describe('a customer’s history by billing period', () => {
  it('sums each period from its anchor day’s local midnight, and answers period=current and previous', async () => {
    const { gw } = await start(at('2026-11-26T10:00:00Z'), { env: { USAGE_HISTORY_DAYS: '70' } });
    const id = await customer(gw, { anchorDay: 15, timeZone: 'Europe/Paris' });
    // Either side of 15 November 00:00 in Paris (23:00 UTC on the 14th), and today.
    seed(gw, id, ['2026-10-14T22:00:00Z', '2026-11-14T22:59:59Z', '2026-11-14T23:00:00Z', '2026-11-26T09:00:00Z'], 2);
    const periods = await history(gw, id, 'granularity=period&from=2026-10-20&to=2026-11-20');
    expect(steps(periods)).toEqual([
      ['2026-10-14T22:00:00.000Z', '2026-11-14T23:00:00.000Z', 2],
      ['2026-11-14T23:00:00.000Z', '2026-12-14T23:00:00.000Z', 2],
    ]);
    expect(periods.totals.units).toBe(8);
    const current = await history(gw, id, 'granularity=period&period=current');
    expect(steps(current)).toEqual([['2026-11-14T23:00:00.000Z', '2026-12-14T23:00:00.000Z', 2]]);
    const previousDays = await history(gw, id, 'granularity=day&period=previous');
    expect(previousDays.from).toBe('2026-10-14T22:00:00.000Z');
    expect(previousDays.to).toBe('2026-11-14T23:00:00.000Z');
    // 31 local days, one of them 25 hours (25 October).
    expect(previousDays.series).toHaveLength(31);
    expect(previousDays.totals.admitted).toBe(2);
    const csv = await get(gw, `/admin/customers/${id}/usage/history?granularity=period&period=current&format=csv`);
    expect(csv.body).toBe(
      'start,end,admitted,limited,banned,refused,forbidden,units,upstreamFailed,outOfCredits\n' +
        '2026-11-14T23:00:00.000Z,2026-12-14T23:00:00.000Z,2,0,0,0,0,4,0,0\n',
    );
  });

  it('refuses a period that began before the retention', async () => {
    // Shorter than the default 63 days, which hold every previous period whole.
    const { gw } = await start(at('2026-11-26T10:00:00Z'), { env: { USAGE_HISTORY_DAYS: '35' } });
    const id = await customer(gw, { anchorDay: 15, timeZone: 'Europe/Paris' });
    const res = await get(gw, `/admin/customers/${id}/usage/history?granularity=period&period=previous`);
    expectError(res, 400, 'invalid_request');
    // 35 days back is 22 October 10:00 UTC: the first whole period starts on 15 November.
    expect(res.json().message).toMatch(/from must be on or after 2026-11-14T23:00:00.000Z/);
  });
});

describe('what the route refuses', () => {
  const NOW = at('2026-11-26T10:00:00Z');
  it.each([
    ['from that is no date', 'from=yesterday', 400],
    ['from that does not exist', 'from=2026-02-30', 400],
    ['to at 24:00', 'to=2026-11-20T24:00:00Z', 400],
    ['a date-time without a zone', 'from=2026-11-20T10:00:00', 400],
    ['an unknown granularity', 'granularity=week', 400],
    ['an unknown period', 'period=last', 400],
    ['period with from', 'period=current&from=2026-11-20', 400],
    ['from after now', 'from=2026-11-27T10:00:00Z', 400],
    ['from after to', 'from=2026-11-20&to=2026-11-19', 400],
    ['from before the retention', 'from=2026-09-01', 400],
    ['an unknown parameter', 'sort=units', 400],
    ['an unknown format', 'format=xml', 400],
    ['from too long', `from=${'9'.repeat(65)}`, 400],
    ['a script in from', 'from=%3Cscript%3E', 400],
    ['an array for granularity', 'granularity=day&granularity=hour', 400],
  ])('%s: %s → %i in the Error shape', async (_label, query, status) => {
    const { gw } = await start(NOW);
    const id = await customer(gw);
    expectError(await get(gw, `/admin/customers/${id}/usage/history?${query}`), status, 'invalid_request');
  });

  it('404s a customer that does not exist, or was deleted, and 400s an id too long', async () => {
    const { gw } = await start(NOW);
    expectError(await get(gw, '/admin/customers/cus_0000000000000000/usage/history'), 404, 'not_found');
    const id = await customer(gw);
    expect(
      (await gw.admin.inject({ method: 'DELETE', url: `/admin/customers/${id}`, headers: admin })).statusCode,
    ).toBe(204);
    expectError(await get(gw, `/admin/customers/${id}/usage/history`), 404, 'not_found');
    expectError(await get(gw, `/admin/customers/${'c'.repeat(65)}/usage/history`), 400, 'invalid_request');
  });

  it('takes a zone a part-hour off UTC, and refuses one whose clocks change by half an hour, naming why', async () => {
    const { gw } = await start(NOW);
    for (const timeZone of ['Asia/Kolkata', 'Asia/Kathmandu', 'America/St_Johns', 'Australia/Adelaide']) {
      await customer(gw, { timeZone });
    }
    const res = await gw.admin.inject({
      method: 'POST',
      url: '/admin/customers',
      headers: admin,
      payload: { name: 'Acme', plan: 'pro', billing: { timeZone: 'Australia/Lord_Howe' } },
    });
    expectError(res, 400, 'invalid_request');
    expect(res.json().message).toMatch(/Australia\/Lord_Howe is \+10:30 or \+11:00 from UTC by the season/);
    const id = await customer(gw);
    const patched = await gw.admin.inject({
      method: 'PATCH',
      url: `/admin/customers/${id}`,
      headers: admin,
      payload: { billing: { timeZone: 'Australia/Lord_Howe' } },
    });
    expectError(patched, 400, 'invalid_request');
    expect(patched.json().message).toMatch(/history is kept per local hour/);
  });

  it('answers 409 for the days of a customer stored with such a zone before it was refused, and its hours', async () => {
    const { gw } = await start(NOW, { env: { USAGE_HISTORY_DAYS: '70' } });
    const id = 'cus_LordHowe00000000';
    await gw.deps.customerStore.insert({
      id,
      name: 'Island',
      plan: 'pro',
      billing: { anchorDay: 1, timeZone: 'Australia/Lord_Howe' },
      createdAt: new Date(NOW - 40 * 86_400_000).toISOString(),
    });
    // 4 October: +10:30 until 02:00, then +11:00; its days start on the UTC hour or half an hour past it.
    const days = await get(gw, `/admin/customers/${id}/usage/history?granularity=day&from=2026-10-01&to=2026-10-08`);
    expectError(days, 409, 'conflict');
    expect(days.json().message).toMatch(/changes its clocks by less than an hour/);
    expect((await get(gw, `/admin/customers/${id}/usage/history?granularity=hour`)).statusCode).toBe(200);
  });
});

describe('a customer’s history with its Redis out of reach', () => {
  it('answers 503 rate_limiter_unavailable with Retry-After, JSON or CSV', async () => {
    const { gw } = await start(Date.now(), { redis: true });
    const id = await customer(gw);
    gw.redis?.disconnect();
    for (const query of ['', '?granularity=day&format=csv']) {
      const res = await get(gw, `/admin/customers/${id}/usage/history${query}`);
      expectError(res, 503, 'rate_limiter_unavailable');
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
  });
});

describe('customers in the top lists (GET /admin/usage)', () => {
  it.each(['memory', 'redis'] as const)(
    'ranks the window’s customers by the sort, with name and plan, beside the keys (%s)',
    async (backend) => {
      const now = Date.now();
      const { gw } = await start(now, { redis: backend === 'redis' });
      const [small, big] = [await customer(gw), await customer(gw)];
      await gw.admin.inject({
        method: 'PATCH',
        url: `/admin/customers/${big}`,
        headers: admin,
        payload: { name: 'Big' },
      });
      const hourAgo = now - HOUR_MS;
      gw.deps.history.count(small, 'admitted', 1, hourAgo);
      gw.deps.history.count(small, 'admitted', 1, now);
      gw.deps.history.count(small, 'limited', 0, now);
      gw.deps.history.count(big, 'admitted', 10, now);
      gw.deps.history.count('cus_gone0000000000', 'admitted', 1, now);
      gw.deps.history.count('key_alone', 'admitted', 1, now);
      await gw.deps.history.flush();
      // The index is written off the request path, a turn after the first count.
      await new Promise((resolve) => setImmediate(resolve));
      const byUnits = await get(gw, '/admin/usage?window=24h&sort=units');
      expect(byUnits.statusCode, byUnits.body).toBe(200);
      const top = byUnits.json();
      expect(
        top.customers.map((c: { id: string; name: string; plan: string; units: number }) => [
          c.id,
          c.name,
          c.plan,
          c.units,
        ]),
      ).toEqual([
        [big, 'Big', 'pro', 10],
        [small, 'Acme', 'pro', 2],
        ['cus_gone0000000000', '', '(unknown customer)', 1],
      ]);
      expect(top.customers[1]).toMatchObject({ admitted: 2, limited: 1, refused: 1 });
      // The keys' list and totals are the keys' alone, as before: no request counted twice.
      expect(top.keys.map((k: { id: string }) => k.id)).toEqual(['key_alone']);
      // The customers with requests in the window are counted whole, whatever the limit lists.
      expect(top.totals).toMatchObject({ admitted: 1, keys: 1, customers: 3 });
      const byRefused = (await get(gw, '/admin/usage?window=24h&sort=refused&limit=1')).json();
      expect(byRefused.customers.map((c: { id: string }) => c.id)).toEqual([small]);
      expect(byRefused.totals.customers).toBe(3);
    },
  );
});
