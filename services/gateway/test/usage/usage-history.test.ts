import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createKey } from '../../src/keys/create-key.js';
import { toKeyFileEntry } from '../../src/keys/keys-file.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import { DAY_MS, HOUR_MS } from '../../src/usage/usage-history.js';
import { ADMIN_TOKEN, addKey, bearer, type TestGateway, useGateways } from '../support/helpers.js';
import { testClock } from '../support/test-clock.js';

const gateways = useGateways();

/** A clock the test moves; it starts 10 minutes into the current hour, so writes never expire at once. */
function hourClock() {
  let t = Math.floor(Date.now() / HOUR_MS) * HOUR_MS + 10 * 60_000;
  return {
    now: () => t,
    set(ms: number) {
      t = ms;
    },
    get hour() {
      return t - (t % HOUR_MS);
    },
  };
}

const dir = mkdtempSync(join(tmpdir(), 'history-'));
function plansFile(content: unknown): string {
  const path = join(dir, `plans-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, JSON.stringify(content));
  return path;
}

const newPrefix = () => `h${Math.random().toString(36).slice(2, 8)}:`;

async function replicas(
  clock: { now: () => number },
  env: Record<string, string> = {},
  options: { redis?: boolean; prefix?: string } = {},
) {
  const keyStore = new MemoryKeyStore();
  const prefix = options.prefix ?? newPrefix();
  const make = () =>
    gateways.start({
      ...(options.redis === false ? { redisUrl: null } : {}),
      prefix,
      // Commands may take 2 s, not 250 ms: these tests count decisions and read them back, and on a
      // loaded machine a read that times out answers 503, which is another test's subject.
      env: { BAN_GRACE_MS: '0', BAN_THRESHOLD: '1000', REDIS_COMMAND_TIMEOUT_MS: '2000', ...env },
      keyStore,
      now: clock.now,
    });
  const a = await make();
  const b = options.redis === false ? a : await make();
  return { a, b, keyStore };
}

const admin = (gw: TestGateway, url: string, headers: Record<string, string> = {}) =>
  gw.admin.inject({ url, headers: { ...bearer(ADMIN_TOKEN), ...headers } });

async function send(gw: TestGateway, key: string, n: number, method: 'GET' | 'POST' = 'GET') {
  const statuses = await Promise.all(
    Array.from({ length: n }, () =>
      gw.app.inject({
        method,
        url: '/v1/pets',
        headers: { ...bearer(key), ...(method === 'POST' ? { 'content-type': 'application/json' } : {}) },
        ...(method === 'POST' ? { payload: { name: 'Rex', categoryId: 1 } } : {}),
      }),
    ),
  );
  return statuses.map((r) => r.statusCode);
}

const count = (statuses: number[], status: number) => statuses.filter((s) => s === status).length;

/** Counts as the history reports them: zero unless given. */
const counts = (given: Record<string, number>) => ({
  admitted: 0,
  limited: 0,
  banned: 0,
  outOfCredits: 0,
  refused: 0,
  forbidden: 0,
  units: 0,
  upstreamFailed: 0,
  ...given,
});

describe('usage history through two replicas on one Redis', () => {
  it('counts every decision of concurrent traffic exactly, in the hour it was made', async () => {
    const clock = hourClock();
    const { a, b } = await replicas(clock);
    const { id, key } = await addKey(a.deps, 'enterprise', { perMinute: 50, perDay: 10_000 });
    const statuses = (await Promise.all([send(a, key, 60), send(b, key, 60)])).flat();
    expect(count(statuses, 200)).toBe(50);
    expect(count(statuses, 429)).toBe(70);

    const res = await admin(a, `/admin/keys/${id}/usage/history`);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.totals).toEqual(counts({ admitted: 50, limited: 70, refused: 70, units: 50 }));
    expect(body.granularity).toBe('hour');
    expect(body.series).toHaveLength(24);
    // All of it in this hour.
    expect(body.series.at(-1)).toEqual({
      start: new Date(clock.hour).toISOString(),
      end: new Date(clock.hour + HOUR_MS).toISOString(),
      ...body.totals,
    });
    // The same answer from the other replica: the history is shared, not per process.
    expect((await admin(b, `/admin/keys/${id}/usage/history`)).json().totals).toEqual(body.totals);
  });

  it('puts requests on either side of an hour in their own hours, and sums them by day', async () => {
    const clock = hourClock();
    const { a } = await replicas(clock);
    const { id, key } = await addKey(a.deps, 'enterprise', { perMinute: 1000, perDay: 10_000 });
    const nextHour = clock.hour + HOUR_MS;
    clock.set(nextHour - 1);
    expect(count(await send(a, key, 3), 200)).toBe(3);
    clock.set(nextHour);
    expect(count(await send(a, key, 2), 200)).toBe(2);

    const hours = (await admin(a, `/admin/keys/${id}/usage/history`)).json().series;
    expect(hours.at(-2)).toMatchObject({ start: new Date(nextHour - HOUR_MS).toISOString(), admitted: 3 });
    expect(hours.at(-1)).toMatchObject({ start: new Date(nextHour).toISOString(), admitted: 2 });

    const days = (await admin(a, `/admin/keys/${id}/usage/history?granularity=day`)).json();
    expect(days.series).toHaveLength(30);
    const today = days.series.find((d: { start: string }) => Date.parse(d.start) === nextHour - (nextHour % DAY_MS));
    const yesterday = days.series.find(
      (d: { start: string }) => Date.parse(d.start) === nextHour - (nextHour % DAY_MS) - DAY_MS,
    );
    // An hour boundary that is also midnight splits the two across days; otherwise one day has all five.
    expect((today?.admitted ?? 0) + (yesterday?.admitted ?? 0)).toBe(5);
    expect(days.totals.admitted).toBe(5);
  });

  it('counts route costs as units, and refusals of a scope the key lacks as forbidden, not admitted', async () => {
    const clock = hourClock();
    const { a } = await replicas(clock, {
      PLANS_FILE: plansFile({
        plans: { metered: { windows: { minute: 100 } }, reader: { windows: { minute: 100 }, scopes: ['pets:read'] } },
        routeCosts: { 'POST /v1/pets': 5 },
      }),
    });
    const metered = createKey({ plan: 'metered', name: 'm' });
    const reader = createKey({ plan: 'reader', name: 'r' });
    await a.deps.keyStore.insert(metered.record);
    await a.deps.keyStore.insert(reader.record);
    // The echo upstream answers 200 to anything.
    expect(count(await send(a, metered.key, 3, 'POST'), 200)).toBe(3);
    expect(count(await send(a, metered.key, 2), 200)).toBe(2);
    expect(count(await send(a, reader.key, 4, 'POST'), 403)).toBe(4);

    const m = (await admin(a, `/admin/keys/${metered.record.id}/usage/history`)).json().totals;
    expect(m).toMatchObject({ admitted: 5, units: 17, forbidden: 0 });
    const r = (await admin(a, `/admin/keys/${reader.record.id}/usage/history`)).json().totals;
    expect(r).toEqual(counts({ forbidden: 4 }));
  });

  it('counts admitted requests the upstream did not serve apart (upstreamFailed), bills none of their units, and still counts them against the limit', async () => {
    const clock = hourClock();
    const keyStore = new MemoryKeyStore();
    const prefix = `h${Math.random().toString(36).slice(2, 8)}:`;
    const env = {
      PLANS_FILE: plansFile({ plans: { metered: { windows: { minute: 100 } } }, routeCosts: { 'POST /v1/pets': 5 } }),
    };
    // Two replicas on one Redis: one in front of the echo upstream, one in front of nothing.
    const served = await gateways.start({ prefix, env, keyStore, now: clock.now });
    const down = await gateways.start({ prefix, env, keyStore, now: clock.now, upstream: 'http://127.0.0.1:9' });
    const { key, record } = createKey({ plan: 'metered', name: 'm' });
    await keyStore.insert(record);
    expect(count(await send(served, key, 4), 200)).toBe(4);
    expect(count(await send(down, key, 3), 503)).toBe(3);
    expect(count(await send(down, key, 2, 'POST'), 503)).toBe(2);

    // Against the limit: 4 + 3 + 2 × 5 units, whichever replica answers.
    const next = await served.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expect(next.headers['x-ratelimit-remaining']).toBe(String(100 - 17 - 1));
    const history = (await admin(down, `/admin/keys/${record.id}/usage/history`)).json();
    expect(history.totals).toEqual(counts({ admitted: 5, units: 5, upstreamFailed: 5 }));
    expect(history.series.at(-1)).toMatchObject({ admitted: 5, units: 5, upstreamFailed: 5 });
    const csv = await admin(served, `/admin/keys/${record.id}/usage/history?format=csv`);
    expect(csv.body.split('\n').at(-2)).toBe(
      `${new Date(clock.hour).toISOString()},${new Date(clock.hour + HOUR_MS).toISOString()},5,0,0,0,0,5,5,0`,
    );
    const top = (await admin(served, '/admin/usage?sort=upstreamFailed')).json();
    expect(top.keys).toEqual([expect.objectContaining({ id: record.id, admitted: 5, units: 5, upstreamFailed: 5 })]);
    expect(top.totals).toMatchObject({ admitted: 5, units: 5, upstreamFailed: 5 });
    expect(top.plans).toEqual([expect.objectContaining({ plan: 'metered', admitted: 5, units: 5, upstreamFailed: 5 })]);
    expect(top.hours.at(-1)).toMatchObject({ admitted: 5, upstreamFailed: 5 });
  });

  it('counts upstream failures apart in the embedded (memory) history too', async () => {
    const clock = hourClock();
    const gw = await gateways.start({ redisUrl: null, now: clock.now, upstream: 'http://127.0.0.1:9' });
    const { id, key } = await addKey(gw.deps, 'free');
    expect(count(await send(gw, key, 3), 503)).toBe(3);
    const totals = (await admin(gw, `/admin/keys/${id}/usage/history`)).json().totals;
    expect(totals).toMatchObject({ admitted: 0, units: 0, upstreamFailed: 3 });
  });

  for (const backend of ['redis', 'memory'] as const) {
    it(`counts 402s (out of credits) as outOfCredits, apart from the 429s, in JSON, CSV and top keys (${backend})`, async () => {
      const clock = hourClock();
      // 2 credits a period and 3 requests a minute: the credits run out before the window does.
      const env = {
        PLANS_FILE: plansFile({
          plans: { prepaid: { windows: { minute: 3 }, credits: { refill: { amount: 2, every: 'period' } } } },
        }),
      };
      const { a } = await replicas(clock, env, { redis: backend === 'redis' });
      const { key, record } = createKey({ plan: 'prepaid', name: 'p' });
      await a.deps.keyStore.insert(record);
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push(...(await send(a, key, 1)));
      expect(statuses).toEqual([200, 200, 402, 402]);
      const topUp = await a.admin.inject({
        method: 'POST',
        url: `/admin/keys/${record.id}/credits`,
        headers: bearer(ADMIN_TOKEN),
        payload: { amount: 5, reason: 'test' },
      });
      expect(topUp.statusCode).toBe(201);
      // The 402s took nothing: one more fits the minute, then its 429s.
      for (let i = 0; i < 3; i++) statuses.push(...(await send(a, key, 1)));
      expect(statuses.slice(4)).toEqual([200, 429, 429]);

      const history = (await admin(a, `/admin/keys/${record.id}/usage/history`)).json();
      expect(history.totals).toEqual(counts({ admitted: 3, units: 3, limited: 2, refused: 2, outOfCredits: 2 }));
      const csv = (await admin(a, `/admin/keys/${record.id}/usage/history?format=csv`)).body.split('\n');
      expect(csv[0]).toBe('start,end,admitted,limited,banned,refused,forbidden,units,upstreamFailed,outOfCredits');
      expect(csv.at(-2)).toBe(
        `${new Date(clock.hour).toISOString()},${new Date(clock.hour + HOUR_MS).toISOString()},3,2,0,2,0,3,0,2`,
      );
      const top = (await admin(a, '/admin/usage')).json();
      expect(top.keys).toEqual([expect.objectContaining({ id: record.id, refused: 2, outOfCredits: 2 })]);
      expect(top.totals).toMatchObject({ refused: 2, outOfCredits: 2 });
    });
  }

  it('counts refusals of a ban the replica already knows (no Redis call) as banned, on every replica', async () => {
    const clock = hourClock();
    const { a, b } = await replicas(clock, { BAN_THRESHOLD: '1' });
    const { id, key } = await addKey(a.deps, 'enterprise', { perMinute: 1, perDay: 100 });
    // 200, then 429 limited (strike 1), then 429 banned: the ban starts in the shared script.
    for (const expected of [200, 429, 429]) expect(await send(a, key, 1)).toEqual([expected]);
    // Each replica learns the ban once from Redis, then refuses from its own memory.
    expect(await send(b, key, 1)).toEqual([429]);
    expect(count(await send(a, key, 4), 429)).toBe(4);
    expect(count(await send(b, key, 3), 429)).toBe(3);
    const decisions = await a.deps.registry.getSingleMetricAsString('gateway_rate_limit_decisions_total');
    expect(decisions).toMatch(/decision="banned",source="local-ban",service="gateway"} 4$/m);

    // B's local refusals are written in a batch within a second; A's read writes A's own first.
    await vi.waitFor(
      async () => {
        const totals = (await admin(a, `/admin/keys/${id}/usage/history`)).json().totals;
        expect(totals).toMatchObject({ admitted: 1, limited: 1, banned: 1 + 1 + 4 + 3, refused: 1 + 1 + 1 + 4 + 3 });
      },
      { timeout: 5_000, interval: 100 },
    );
  });

  it('exports the series as CSV for billing, by format=csv or Accept: text/csv', async () => {
    const clock = hourClock();
    const { a } = await replicas(clock);
    const { id, key } = await addKey(a.deps, 'enterprise', { perMinute: 2, perDay: 100 });
    await send(a, key, 3);
    const from = new Date(clock.hour - 2 * HOUR_MS).toISOString();
    for (const [query, headers] of [
      [`?from=${from}&format=csv`, {}],
      [`?from=${from}`, { accept: 'text/csv' }],
    ] as const) {
      const res = await admin(a, `/admin/keys/${id}/usage/history${query}`, headers);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('text/csv; charset=utf-8');
      expect(res.headers['content-disposition']).toMatch(/^attachment; filename="usage-[\w.:-]+\.csv"$/);
      expect(res.body.trim().split('\n')).toEqual([
        'start,end,admitted,limited,banned,refused,forbidden,units,upstreamFailed,outOfCredits',
        `${hourIso(clock.hour - 2 * HOUR_MS)},${hourIso(clock.hour - HOUR_MS)},0,0,0,0,0,0,0,0`,
        `${hourIso(clock.hour - HOUR_MS)},${hourIso(clock.hour)},0,0,0,0,0,0,0,0`,
        `${hourIso(clock.hour)},${hourIso(clock.hour + HOUR_MS)},2,1,0,1,0,2,0,0`,
      ]);
    }
  });

  it('answers CSV only when asked by format or by an Accept naming text/csv, in a file named for the key, start and step', async () => {
    const clock = hourClock();
    const { a } = await replicas(clock, {}, { redis: false });
    const { id, key } = await addKey(a.deps, 'free');
    await send(a, key, 1);
    const from = clock.hour - HOUR_MS;
    const url = `/admin/keys/${id}/usage/history?from=${new Date(from).toISOString()}`;
    const type = async (query: string, accept?: string) =>
      (await admin(a, `${url}${query}`, accept === undefined ? {} : { accept })).headers['content-type'];
    expect(await type('', 'application/json, text/csv;q=0.5')).toBe('text/csv; charset=utf-8');
    expect(await type('', 'text/csvx')).toMatch(/^application\/json/);
    expect(await type('', 'application/xtext/csv')).toMatch(/^application\/json/);
    expect(await type('&format=json', 'text/csv')).toMatch(/^application\/json/);
    expect(await type('')).toMatch(/^application\/json/);
    const day = await admin(a, `/admin/keys/${id}/usage/history?granularity=day&format=csv`);
    const hourly = await admin(a, `${url}&format=csv`);
    const stamp = (ms: number) => new Date(ms).toISOString().slice(0, 13);
    expect(hourly.headers['content-disposition']).toBe(`attachment; filename="usage-${id}-${stamp(from)}-hour.csv"`);
    const dayFrom = clock.hour - (clock.hour % DAY_MS) - 29 * DAY_MS;
    expect(day.headers['content-disposition']).toBe(`attachment; filename="usage-${id}-${stamp(dayFrom)}-day.csv"`);
  });

  it.each([
    ['from=yesterday', 'from must be an RFC 3339 date-time or a date'],
    ['from=2026-02-31T00:00:00Z&to=2026-02-01', 'from is not a real date and time'],
    // Dates and times that do not exist, which Date.parse rolls over into the next day.
    ['from=2026-11-31', 'from is not a real date and time: "2026-11-31"'],
    ['to=2026-11-01T24:00:00Z', 'to is not a real date and time: "2026-11-01T24:00:00Z"'],
    ['from=2026-02-29T00:00:00Z', 'from is not a real date and time'],
    ['from=2026-11-01T10:00:00', 'from must be an RFC 3339 date-time or a date'],
    ['granularity=week', 'granularity'],
    ['format=xml', 'format'],
    ['colour=red', 'colour'],
  ])('refuses %s with 400 in the error shape', async (query, message) => {
    const clock = hourClock();
    const { a } = await replicas(clock);
    const { id } = await addKey(a.deps, 'free');
    const res = await admin(a, `/admin/keys/${id}/usage/history?${query}`);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'invalid_request', status: 400 });
    expect(res.json().message).toContain(message);
  });

  it('refuses a range before the retention, one starting after now and an empty one, and 404s an unknown key', async () => {
    const clock = hourClock();
    const { a } = await replicas(clock, { USAGE_HISTORY_DAYS: '2' });
    const { id } = await addKey(a.deps, 'free');
    const iso = (ms: number) => new Date(ms).toISOString();
    const before = await admin(a, `/admin/keys/${id}/usage/history?from=${iso(clock.now() - 3 * DAY_MS)}`);
    expect(before.statusCode).toBe(400);
    expect(before.json()).toMatchObject({ code: 'invalid_request', status: 400 });
    expect(before.json().message).toContain('kept for 2 days (USAGE_HISTORY_DAYS)');
    const later = await admin(a, `/admin/keys/${id}/usage/history?from=${iso(clock.hour + HOUR_MS)}`);
    expect(later.statusCode).toBe(400);
    expect(later.json().message).toBe('from must not be after the current hour');
    const tomorrow = clock.now() - (clock.now() % DAY_MS) + DAY_MS;
    const laterDay = await admin(a, `/admin/keys/${id}/usage/history?granularity=day&from=${iso(tomorrow)}`);
    expect(laterDay.statusCode).toBe(400);
    expect(laterDay.json().message).toBe('from must not be after the current day');
    // A range that reaches past now ends with the current hour: what has happened so far.
    const after = await admin(a, `/admin/keys/${id}/usage/history?to=${iso(clock.now() + 2 * HOUR_MS)}`);
    expect(after.statusCode).toBe(200);
    expect(after.json().to).toBe(iso(clock.hour + HOUR_MS));
    const empty = await admin(a, `/admin/keys/${id}/usage/history?from=${iso(clock.hour)}&to=${iso(clock.hour - 1)}`);
    expect(empty.json().message).toBe('from must be before to');
    // The retention's first hour, and a top-keys window as long as the retention, are still in.
    const oldest = clock.hour - 2 * DAY_MS;
    expect((await admin(a, `/admin/keys/${id}/usage/history?from=${iso(oldest)}`)).statusCode).toBe(200);
    expect((await admin(a, `/admin/keys/${id}/usage/history?from=${iso(oldest - 1)}`)).statusCode).toBe(400);
    expect((await admin(a, '/admin/usage?window=2d')).statusCode).toBe(200);
    expect((await admin(a, '/admin/usage?window=49h')).statusCode).toBe(400);
    const missing = await admin(a, '/admin/keys/key_nope/usage/history');
    expect(missing.statusCode).toBe(404);
    const tooLong = await admin(a, '/admin/usage?window=3d');
    expect(tooLong.statusCode).toBe(400);
    expect(tooLong.json()).toEqual({
      code: 'invalid_request',
      message: 'The history is kept for 2 days: window 3d is longer',
      status: 400,
    });
    expect(before.json().message).toBe(
      `The history is kept for 2 days (USAGE_HISTORY_DAYS): from must be on or after ${iso(clock.hour - 2 * DAY_MS)}`,
    );
  });

  it('answers this month so far on its first, a middle and its last day: period=current, or its first and last dates', async () => {
    const iso = (ms: number) => new Date(ms).toISOString();
    const date = (ms: number) => iso(ms).slice(0, 10);
    const today = new Date();
    const monthStart = Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), 1);
    const monthEnd = Date.UTC(today.getUTCFullYear(), today.getUTCMonth() + 1, 1);
    for (const at of [monthStart + 10 * 60_000, monthStart + 14 * DAY_MS + 12 * HOUR_MS, monthEnd - 10 * 60_000]) {
      const clock = hourClock();
      clock.set(at);
      // Embedded: the history keeps to the test's clock, whatever day it names.
      const { a } = await replicas(clock, {}, { redis: false });
      const { id, key } = await addKey(a.deps, 'free');
      expect(await send(a, key, 2)).toEqual([200, 200]);
      const tomorrow = (Math.floor(at / DAY_MS) + 1) * DAY_MS;
      const days = (Math.floor(at / DAY_MS) * DAY_MS - monthStart) / DAY_MS + 1;
      for (const query of [
        'period=current&granularity=day',
        `from=${date(monthStart)}&to=${date(monthEnd - DAY_MS)}&granularity=day`,
      ]) {
        const res = await admin(a, `/admin/keys/${id}/usage/history?${query}`);
        expect(res.statusCode, `${iso(at)} ${query}: ${res.body}`).toBe(200);
        expect(res.json()).toMatchObject({ from: iso(monthStart), to: iso(tomorrow) });
        expect(res.json().series).toHaveLength(days);
        expect(res.json().totals.admitted).toBe(2);
      }
      // By the hour, today's date as `to` takes in today up to the current hour.
      const hours = await admin(a, `/admin/keys/${id}/usage/history?from=${date(at)}&to=${date(at)}`);
      expect(hours.statusCode).toBe(200);
      expect(hours.json()).toMatchObject({
        from: iso(Math.floor(at / DAY_MS) * DAY_MS),
        to: iso(clock.hour + HOUR_MS),
      });
      expect(hours.json().totals.admitted).toBe(2);
    }
  });

  it('answers the whole previous month with period=previous, and refuses period with from or to', async () => {
    const clock = hourClock();
    const today = new Date(clock.now());
    const previousStart = Date.UTC(today.getUTCFullYear(), today.getUTCMonth() - 1, 1);
    const monthStart = Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), 1);
    // Its last hour, then the third of this month (within the 35 days kept).
    clock.set(monthStart - 30 * 60_000);
    const { a } = await replicas(clock, {}, { redis: false });
    const { id, key } = await addKey(a.deps, 'free');
    expect(await send(a, key, 3)).toEqual([200, 200, 200]);
    clock.set(monthStart + 2 * DAY_MS + HOUR_MS);
    expect(await send(a, key, 1)).toEqual([200]);
    const res = await admin(a, `/admin/keys/${id}/usage/history?period=previous&granularity=day`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      from: new Date(previousStart).toISOString(),
      to: new Date(monthStart).toISOString(),
    });
    expect(res.json().series).toHaveLength((monthStart - previousStart) / DAY_MS);
    expect(res.json().totals.admitted).toBe(3);
    for (const query of ['period=current&from=2026-11-01', 'period=previous&to=2026-11-30']) {
      const refused = await admin(a, `/admin/keys/${id}/usage/history?${query}`);
      expect(refused.statusCode).toBe(400);
      expect(refused.json()).toMatchObject({ code: 'invalid_request', status: 400 });
      expect(refused.json().message).toContain('give period, or from and to, not both');
    }
    expect((await admin(a, `/admin/keys/${id}/usage/history?period=last`)).statusCode).toBe(400);
  });

  it('keeps a day of history in Redis until its retention ends, and a revoked key’s history readable', async () => {
    const clock = hourClock();
    const { a } = await replicas(clock, { USAGE_HISTORY_DAYS: '35' });
    const { id, key } = await addKey(a.deps, 'free');
    await send(a, key, 1);
    const day = Math.floor(clock.now() / DAY_MS);
    const expiresAt = await a.redis?.pexpiretime(`${a.config.redisPrefix}{${id}}:h:${day}`);
    expect(expiresAt).toBe((day + 1) * DAY_MS + 35 * DAY_MS);
    // And the day's set of active keys (top keys) with it.
    await vi.waitFor(async () =>
      expect(await a.redis?.pexpiretime(`${a.config.redisPrefix}usage:keys:${day}`)).toBe(
        (day + 1) * DAY_MS + 35 * DAY_MS,
      ),
    );
    const revoked = await a.admin.inject({ method: 'DELETE', url: `/admin/keys/${id}`, headers: bearer(ADMIN_TOKEN) });
    expect(revoked.statusCode).toBe(204);
    expect((await admin(a, `/admin/keys/${id}/usage/history`)).json().totals.admitted).toBe(1);
  });
});

describe('a key’s live usage (GET /admin/keys/:id/usage)', () => {
  it('shows each window’s limit, use, what remains and its reset, the refusals and a ban, as the shared limiter counts them', async () => {
    const clock = hourClock();
    const { a } = await replicas(clock, { BAN_THRESHOLD: '1' });
    const { id, key } = await addKey(a.deps, 'enterprise', { perMinute: 3, perDay: 100 });
    expect(count(await send(a, key, 4), 429)).toBe(1);
    const res = await admin(a, `/admin/keys/${id}/usage`);
    expect(res.statusCode).toBe(200);
    const midnight = clock.now() - (clock.now() % DAY_MS) + DAY_MS;
    expect(res.json()).toEqual({
      id,
      plan: 'enterprise',
      limits: { perMinute: 3, perDay: 100 },
      windows: {
        minute: { limit: 3, used: 3, remaining: 0, resetAt: expect.any(String) },
        day: { limit: 100, used: 3, remaining: 97, resetAt: new Date(midnight).toISOString() },
      },
      ban: null,
      refusals: 1,
    });
    // The next refusal bans (threshold 1): the ban's end is shown.
    expect(await send(a, key, 1)).toEqual([429]);
    const banned = (await admin(a, `/admin/keys/${id}/usage`)).json();
    expect(banned.ban).toEqual({ until: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
    expect((await admin(a, '/admin/keys/key_nope/usage')).statusCode).toBe(404);
  });

  it('answers 503 rate_limiter_unavailable when the limiter cannot be read, and logs why', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ logs, env: { BAN_THRESHOLD: '1000' } });
    const { id } = await addKey(gw.deps, 'free');
    gw.redis?.disconnect();
    const res = await admin(gw, `/admin/keys/${id}/usage`);
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({
      code: 'rate_limiter_unavailable',
      message: 'Cannot reach the rate limiter to read usage; retry in 5 s',
      status: 503,
    });
    expect(logs.filter((l) => l.msg === 'cannot read usage').map((l) => [l.level, typeof l.err])).toEqual([
      [50, 'object'],
    ]);
  });
});

describe('the usage history with its Redis out of reach', () => {
  it('answers a key’s series and the top keys with 503 rate_limiter_unavailable and Retry-After, and logs why', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ logs, env: { BAN_THRESHOLD: '1000' } });
    const { id } = await addKey(gw.deps, 'free');
    // The connection gone, as when Redis is: commands fail at once (no offline queue).
    gw.redis?.disconnect();
    for (const url of [`/admin/keys/${id}/usage/history`, '/admin/usage']) {
      const res = await admin(gw, url);
      expect(res.statusCode, url).toBe(503);
      expect(res.json()).toEqual({
        code: 'rate_limiter_unavailable',
        message: 'Cannot reach Redis to read the usage history; retry in 5 s',
        status: 503,
      });
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    expect(logs.filter((l) => l.msg === 'cannot read the usage history').map((l) => [l.level, typeof l.err])).toEqual([
      [50, 'object'],
      [50, 'object'],
    ]);
  });
});

describe('top keys (GET /admin/usage)', () => {
  for (const backend of ['redis', 'memory'] as const) {
    it(`ranks keys by admitted or refused, with totals per plan and per hour (${backend})`, async () => {
      const clock = hourClock();
      const { a, b } = await replicas(clock, {}, { redis: backend === 'redis' });
      const busy = await addKey(a.deps, 'enterprise', { perMinute: 100, perDay: 10_000 });
      const refused = await addKey(a.deps, 'enterprise', { perMinute: 2, perDay: 10_000 });
      const small = await addKey(a.deps, 'free');
      await Promise.all([send(a, busy.key, 20), send(b, busy.key, 10)]);
      await send(b, refused.key, 12);
      await send(a, small.key, 1);
      // Hours ago, still in the window of 24 h, not in that of 1 h.
      clock.set(clock.now() + 3 * HOUR_MS);
      await send(a, small.key, 4);

      const top = (await admin(a, '/admin/usage')).json();
      expect(top.window).toBe('24h');
      expect(top.sort).toBe('admitted');
      expect(top.keys.map((k: { id: string }) => k.id)).toEqual([busy.id, small.id, refused.id]);
      expect(top.keys[0]).toMatchObject({ plan: 'enterprise', admitted: 30, refused: 0, revoked: false });
      expect(top.totals).toMatchObject({ admitted: 37, refused: 10, keys: 3 });
      expect(top.plans).toEqual([
        { plan: 'enterprise', keys: 2, ...counts({ admitted: 32, limited: 10, refused: 10, units: 32 }) },
        { plan: 'free', keys: 1, ...counts({ admitted: 5, units: 5 }) },
      ]);
      expect(top.hours).toHaveLength(24);
      expect(top.hours.at(-1)).toMatchObject({ admitted: 4 });
      expect(top.hours.at(-4)).toMatchObject({ admitted: 33, refused: 10 });

      const byRefused = (await admin(a, '/admin/usage?sort=refused&limit=1')).json();
      expect(byRefused.keys).toEqual([expect.objectContaining({ id: refused.id, limited: 10, admitted: 2 })]);
      const lastHour = (await admin(a, '/admin/usage?window=1h')).json();
      expect(lastHour.keys.map((k: { id: string }) => k.id)).toEqual([small.id]);
      expect((await admin(a, '/admin/usage?window=24x')).statusCode).toBe(400);
    });
  }
});

const iso = (ms: number) => new Date(ms).toISOString();
/** An instant as the history writes it. */
const hourIso = (ms: number) => new Date(ms).toISOString();

/** [start, admitted] of the steps of a series that admitted anything. */
const busy = (series: Array<{ start: string; admitted: number }>) =>
  series.filter((step) => step.admitted > 0).map((step) => [step.start, step.admitted]);

describe('top keys that no store lists', () => {
  it('names a key from API_KEYS_FILE by its plan and name, and a key no store knows as an unknown key', async () => {
    const clock = hourClock();
    const { key, record } = createKey({ plan: 'pro', name: 'from-file' });
    const file = join(dir, `keys-${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(file, JSON.stringify([toKeyFileEntry(record)]));
    const gw = await gateways.start({ redisUrl: null, now: clock.now, env: { API_KEYS_FILE: file } });
    expect(count(await send(gw, key, 2), 200)).toBe(2);
    // A key gone from every store since (a keys file edited, say): its history stays.
    gw.deps.history.count('key_gone', 'admitted', 1, clock.now());
    const top = (await admin(gw, '/admin/usage')).json();
    expect(top.keys).toEqual([
      { id: record.id, name: 'from-file', plan: 'pro', revoked: false, ...counts({ admitted: 2, units: 2 }) },
      { id: 'key_gone', name: '', plan: '(unknown key)', revoked: false, ...counts({ admitted: 1, units: 1 }) },
    ]);
  });
});

describe('top keys over earlier days', () => {
  it('lists keys idle since an earlier day in a week’s top keys: each day’s active keys outlive their day', async () => {
    const prefix = newPrefix();
    const clock = testClock();
    const { a } = await replicas(clock, {}, { prefix });
    if (a.redis) clock.ages({ client: a.redis as Redis, prefix });
    const keys = [];
    for (let i = 0; i < 3; i++) keys.push(await addKey(a.deps, 'enterprise', { perMinute: 100, perDay: 1_000 }));
    // One key a day, three days running, then two days with none: each day's state ages in Redis.
    for (const [i, k] of keys.entries()) {
      if (i > 0) await clock.advance(DAY_MS);
      expect(count(await send(a, k.key, i + 1), 200)).toBe(i + 1);
    }
    await clock.advance(2 * DAY_MS);

    const week = (await admin(a, '/admin/usage?window=7d')).json();
    expect(week.keys.map((k: { id: string; admitted: number }) => [k.id, k.admitted])).toEqual(
      keys.map((k, i) => [k.id, i + 1]).reverse(),
    );
    expect(week.totals).toMatchObject({ admitted: 6, keys: 3 });
    // The last two days saw nobody.
    expect((await admin(a, '/admin/usage?window=48h')).json().keys).toEqual([]);
  });
});

describe('a `to` inside an hour or a day', () => {
  // Redis: yesterday (UTC), so the day's hash lives by Redis's real clock; memory, on its own
  // clock: 30 November 2026 itself, the last day of a billing month.
  it.each([
    ['redis', Math.floor(Date.now() / DAY_MS) - 1],
    ['memory', Date.UTC(2026, 10, 30) / DAY_MS],
  ] as const)('includes the hour and the day it falls in (%s)', async (backend, day) => {
    const at = (h: number, m = 0, s = 0) => day * DAY_MS + h * HOUR_MS + m * 60_000 + s * 1_000;
    const clock = hourClock();
    clock.set(at(13, 20));
    const { a } = await replicas(clock, {}, { redis: backend === 'redis' });
    const { id, key } = await addKey(a.deps, 'enterprise', { perMinute: 100, perDay: 1_000 });
    expect(count(await send(a, key, 1), 200)).toBe(1);
    clock.set(at(23, 59, 30));
    expect(count(await send(a, key, 2), 200)).toBe(2);
    clock.set(at(25, 10));
    const history = async (query: string) => {
      const res = await admin(a, `/admin/keys/${id}/usage/history?${query}`);
      expect(res.statusCode, res.body).toBe(200);
      return res;
    };

    for (const to of [at(23, 59, 59), at(23, 59, 59) + 999, at(12, 0, 1)]) {
      const days = (await history(`granularity=day&to=${iso(to)}`)).json();
      expect(days.to).toBe(iso(at(24)));
      expect(days.series.at(-1)).toMatchObject({ start: iso(at(0)), admitted: 3, units: 3 });
      expect(days.totals.admitted).toBe(3);
    }
    const csv = (await history(`granularity=day&to=${iso(at(23, 59, 59))}&format=csv`)).body;
    expect(csv.trim().split('\n').at(-1)).toBe(`${iso(at(0))},${iso(at(24))},3,0,0,0,0,3,0,0`);

    const hours = (await history(`from=${iso(at(10))}&to=${iso(at(13, 30))}`)).json();
    expect(hours.to).toBe(iso(at(14)));
    expect(busy(hours.series)).toEqual([[iso(at(13)), 1]]);
    const lastHour = (await history(`from=${iso(at(20))}&to=${iso(at(23, 59, 59))}`)).json();
    expect(lastHour.to).toBe(iso(at(24)));
    expect(busy(lastHour.series)).toEqual([[iso(at(23)), 2]]);
  });
});

/**
 * The history is kept in UTC hours and days whatever the gateway's zone. Each of these tests sets
 * its own zone (process.env.TZ, which Node applies at once): New York (UTC−5 in November, a day
 * behind UTC in the evening) and Chatham (UTC+13:45 in its summer, a quarter hour off any UTC hour
 * and a day ahead in the morning).
 */
describe.each(['America/New_York', 'Pacific/Chatham'])('with the gateway in TZ=%s', (zone) => {
  let before: string | undefined;
  beforeAll(() => {
    before = process.env.TZ;
    process.env.TZ = zone;
  });
  afterAll(() => {
    if (before === undefined) delete process.env.TZ;
    else process.env.TZ = before;
  });

  for (const backend of ['redis', 'memory'] as const) {
    it(`files each request under its UTC hour and day: series, CSV and top keys (${backend})`, async () => {
      // Yesterday (UTC) at 03:05 and 20:05: the previous evening and the afternoon in New York,
      // that afternoon and the next morning in Chatham, each in a Chatham hour that began in the
      // UTC hour before.
      const day = Math.floor(Date.now() / DAY_MS) - 1;
      const at = (h: number, m = 0) => day * DAY_MS + h * HOUR_MS + m * 60_000;
      const clock = hourClock();
      clock.set(at(3, 5));
      const { a } = await replicas(clock, {}, { redis: backend === 'redis' });
      const { id, key } = await addKey(a.deps, 'enterprise', { perMinute: 100, perDay: 1_000 });
      expect(count(await send(a, key, 1), 200)).toBe(1);
      clock.set(at(20, 5));
      expect(count(await send(a, key, 2), 200)).toBe(2);
      clock.set(at(25, 10));

      const url = `/admin/keys/${id}/usage/history`;
      const hours = (await admin(a, `${url}?from=${iso(at(0))}&to=${iso(at(24))}`)).json();
      expect(hours.series[0].start).toBe(iso(at(0)));
      expect(busy(hours.series)).toEqual([
        [iso(at(3)), 1],
        [iso(at(20)), 2],
      ]);
      const csv = (await admin(a, `${url}?from=${iso(at(0))}&to=${iso(at(24))}&format=csv`)).body;
      expect(csv).toContain(`\n${iso(at(3))},${iso(at(4))},1,0,0,0,0,1,0,0\n`);
      expect(csv).toContain(`\n${iso(at(20))},${iso(at(21))},2,0,0,0,0,2,0,0\n`);
      const days = (await admin(a, `${url}?granularity=day&from=${iso(at(0))}&to=${iso(at(48))}`)).json();
      expect(days.series.map((d: { start: string; admitted: number }) => [d.start, d.admitted])).toEqual([
        [iso(at(0)), 3],
        [iso(at(24)), 0],
      ]);

      const top = (await admin(a, '/admin/usage?window=48h')).json();
      expect(top.from).toBe(iso(at(-22)));
      expect(busy(top.hours)).toEqual([
        [iso(at(3)), 1],
        [iso(at(20)), 2],
      ]);
      expect(top.keys).toEqual([expect.objectContaining({ id, admitted: 3 })]);
    });
  }
});
