import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { MemoryCustomerStore } from '../../src/customers/memory-customer-store.js';
import { USAGE_READS_PER_MINUTE } from '../../src/self-service/usage-reads.js';
import { expectError } from '../support/admin.js';
import { ADMIN_TOKEN, bearer, type TestGateway, useGateways } from '../support/helpers.js';
import { startReceiver } from '../support/webhook-receiver.js';

/*
 * GET /v1/usage as a key's holder calls it: its windows and its customer's, the units of the
 * billing period as the admin API's history sums them, nothing taken from any window by reading,
 * the customer's credits as the admin API reads them, and the route's own limit refusing in the
 * Error shape.
 */

const gateways = useGateways();
const admin = bearer(ADMIN_TOKEN);

async function post(gw: TestGateway, url: string, payload: object): Promise<Record<string, string>> {
  const res = await gw.admin.inject({ method: 'POST', url, headers: admin, payload });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

async function adminGet(gw: TestGateway, url: string): Promise<Record<string, unknown>> {
  const res = await gw.admin.inject({ url, headers: admin });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

type Windows = Record<string, { limit: number; used: number; remaining: number; resetAt: string | null }>;

/**
 * The same windows: equal counts, resets within a second. Redis reports a window's reset as now
 * plus its TTL, so two reads a moment apart can name instants a millisecond apart.
 */
function expectSameWindows(actual: unknown, expected: unknown): void {
  const [a, b] = [actual as Windows, expected as Windows];
  expect(Object.keys(a).sort()).toEqual(Object.keys(b).sort());
  for (const [name, { resetAt, ...counts }] of Object.entries(a)) {
    const other = b[name] as Windows[string];
    expect(counts, name).toEqual({ limit: other.limit, used: other.used, remaining: other.remaining });
    if (resetAt === null || other.resetAt === null) expect(resetAt, name).toBe(other.resetAt);
    else expect(Math.abs(Date.parse(resetAt) - Date.parse(other.resetAt)), name).toBeLessThanOrEqual(1_000);
  }
}

const usage = (gw: TestGateway, key: string, ip = '127.0.0.1'): Promise<LightMyRequestResponse> =>
  gw.app.inject({ url: '/v1/usage', headers: bearer(key), remoteAddress: ip });

describe('GET /v1/usage', () => {
  it.each(['redis', 'memory'] as const)(
    'answers the key’s and its customer’s windows and period units, as the admin API reads them (%s)',
    async (backend) => {
      const gw = await gateways.start(backend === 'memory' ? { redisUrl: null } : {});
      const customer = await post(gw, '/admin/customers', {
        name: 'Acme',
        plan: 'pro',
        limits: { perMinute: 50 },
        billing: { anchorDay: 15, timeZone: 'Europe/Paris' },
      });
      const key = await post(gw, '/admin/keys', { customerId: customer.id, name: 'prod', limits: { perMinute: 40 } });
      const other = await post(gw, '/admin/keys', { customerId: customer.id, name: 'ci' });
      for (let i = 0; i < 3; i++) await gw.app.inject({ url: '/v1/pets', headers: bearer(key.key as string) });
      for (let i = 0; i < 2; i++) await gw.app.inject({ url: '/v1/pets', headers: bearer(other.key as string) });

      const res = await usage(gw, key.key as string);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['cache-control']).toBe('no-store');
      const body = res.json();
      const live = await adminGet(gw, `/admin/keys/${key.id}/usage`);
      const period = await adminGet(gw, `/admin/customers/${customer.id}/usage/history?granularity=period`);
      const [current] = (period.series as Array<{ start: string; end: string; units: number }>).slice(-1);
      expectSameWindows(body.key.windows, live.windows);
      expectSameWindows(body.customer.windows, (live.customer as { windows: unknown }).windows);
      expect(body.key).toEqual({
        id: key.id,
        name: 'prod',
        plan: 'pro',
        windows: expect.any(Object),
        ban: null,
        calendar: expect.objectContaining({ timeZone: 'Europe/Paris', anchorDay: 15, monthResetsAt: current?.end }),
        billingPeriod: { start: current?.start, end: current?.end, units: 3 },
      });
      expect(body.key.windows.minute).toMatchObject({ limit: 40, used: 3, remaining: 37 });
      expect(body.customer).toEqual({
        id: customer.id,
        name: 'Acme',
        plan: 'pro',
        windows: expect.any(Object),
        billingPeriod: { start: current?.start, end: current?.end, units: current?.units },
      });
      expect(body.customer.windows.minute).toMatchObject({ limit: 50, used: 5, remaining: 45 });
      expect(current?.units).toBe(5);
      const keyHistory = await adminGet(
        gw,
        `/admin/keys/${key.id}/usage/history?from=${current?.start}&to=${new Date().toISOString()}`,
      );
      expect((keyHistory.totals as { units: number }).units).toBe(body.key.billingPeriod.units);
    },
  );

  it.each(['redis', 'memory'] as const)(
    'answers a customer’s credits, its balance falling by the cost of each admitted request, and none without terms (%s)',
    async (backend) => {
      // A plan whose POST costs 5, so the balance falls by a request's cost, not by one a request.
      const plans = join(mkdtempSync(join(tmpdir(), 'usage-plans-')), 'plans.json');
      writeFileSync(
        plans,
        JSON.stringify({ plans: { metered: { windows: { minute: 100 } } }, routeCosts: { 'POST /v1/pets': 5 } }),
      );
      const gw = await gateways.start({
        ...(backend === 'memory' ? { redisUrl: null } : {}),
        env: { PLANS_FILE: plans },
      });
      const credits = { refill: { amount: 100, every: 'period' } };
      const customer = await post(gw, '/admin/customers', { name: 'Acme', plan: 'metered', credits });
      const key = await post(gw, '/admin/keys', { customerId: customer.id });
      const plain = await post(gw, '/admin/customers', { name: 'Plain', plan: 'metered' });
      const plainKey = await post(gw, '/admin/keys', { customerId: plain.id });
      const credited = async () => {
        const res = await usage(gw, key.key as string);
        expect(res.statusCode, res.body).toBe(200);
        return res.json().customer.credits;
      };

      const admin = await adminGet(gw, `/admin/customers/${customer.id}/credits`);
      expect(await credited()).toEqual({ balance: 100, nextRefillAt: admin.nextRefillAt });
      expect(Date.parse(admin.nextRefillAt as string)).toBeGreaterThan(Date.now());
      const send = (method: 'GET' | 'POST') =>
        gw.app.inject({
          method,
          url: '/v1/pets',
          headers: bearer(key.key as string),
          ...(method === 'POST' ? { payload: { name: 'Rex', categoryId: 1 } } : {}),
        });
      for (const method of ['GET', 'GET', 'POST'] as const) expect((await send(method)).statusCode).toBeLessThan(300);
      expect(await credited()).toEqual({ balance: 93, nextRefillAt: admin.nextRefillAt });
      expect((await adminGet(gw, `/admin/customers/${customer.id}/credits`)).balance).toBe(93);

      await gw.app.inject({ url: '/v1/pets', headers: bearer(plainKey.key as string) });
      const without = await usage(gw, plainKey.key as string);
      expect(without.statusCode, without.body).toBe(200);
      expect(without.json().customer).not.toHaveProperty('credits');
    },
  );

  it.each(['redis', 'memory'] as const)(
    'answers a key of no customer its own credits (its terms or its plan’s), to the unit as the admin API reads them (%s)',
    async (backend) => {
      // POST costs 5; the metered plan refills its lone keys to 40 each UTC day.
      const plans = join(mkdtempSync(join(tmpdir(), 'usage-plans-')), 'plans.json');
      writeFileSync(
        plans,
        JSON.stringify({
          plans: {
            metered: { windows: { minute: 100 }, credits: { refill: { amount: 40, every: 'day' } } },
            plain: { windows: { minute: 100 } },
          },
          routeCosts: { 'POST /v1/pets': 5 },
        }),
      );
      const gw = await gateways.start({
        ...(backend === 'memory' ? { redisUrl: null } : {}),
        env: { PLANS_FILE: plans },
      });
      const own = await post(gw, '/admin/keys', { plan: 'plain' });
      const patched = await gw.admin.inject({
        method: 'PATCH',
        url: `/admin/keys/${own.id}`,
        headers: admin,
        payload: { credits: { refill: { amount: 100, every: 'period' } } },
      });
      expect(patched.statusCode, patched.body).toBe(200);
      const byPlan = await post(gw, '/admin/keys', { plan: 'metered' });
      const none = await post(gw, '/admin/keys', { plan: 'plain' });
      const send = (key: string, method: 'GET' | 'POST') =>
        gw.app.inject({
          method,
          url: '/v1/pets',
          headers: bearer(key),
          ...(method === 'POST' ? { payload: { name: 'Rex', categoryId: 1 } } : {}),
        });
      for (const method of ['GET', 'GET', 'POST'] as const) {
        expect((await send(own.key as string, method)).statusCode).toBeLessThan(300);
        expect((await send(byPlan.key as string, method)).statusCode).toBeLessThan(300);
      }
      await send(none.key as string, 'GET');

      for (const [key, left] of [
        [own, 93],
        [byPlan, 33],
      ] as const) {
        const res = await usage(gw, key.key as string);
        expect(res.statusCode, res.body).toBe(200);
        const body = res.json();
        expect(body.customer).toBeUndefined();
        const read = await adminGet(gw, `/admin/keys/${key.id}/credits`);
        expect(read.balance).toBe(left);
        expect(body.key.credits).toEqual({ balance: read.balance, nextRefillAt: read.nextRefillAt });
        expect(Date.parse(read.nextRefillAt as string)).toBeGreaterThan(Date.now());
      }
      const without = await usage(gw, none.key as string);
      expect(without.statusCode, without.body).toBe(200);
      expect(without.json().key).not.toHaveProperty('credits');

      // A key of a customer spends its customer's balance: shown under the customer, not the key.
      const customer = await post(gw, '/admin/customers', { name: 'Acme', plan: 'metered' });
      const owned = await post(gw, '/admin/keys', { customerId: customer.id });
      const ownedUsage = (await usage(gw, owned.key as string)).json();
      expect(ownedUsage.key).not.toHaveProperty('credits');
      expect(ownedUsage.customer.credits).toMatchObject({ balance: 40 });
    },
  );

  it('announces a refill its read applied, as the admin API’s read does: credits.refilled naming the customer', async () => {
    const gw = await gateways.start({ env: { WEBHOOKS_ALLOW_INSECURE: 'true', WEBHOOKS_ALLOW_PRIVATE: 'true' } });
    const hook = await startReceiver();
    try {
      await post(gw, '/admin/webhooks', { url: hook.url, events: ['credits.refilled'] });
      const credits = { refill: { amount: 10, every: 'day' } };
      const customer = await post(gw, '/admin/customers', { name: 'Acme', plan: 'pro', credits });
      const key = await post(gw, '/admin/keys', { customerId: customer.id });
      // No request yet: this read is the balance's first use, so it is the one that refills.
      expect((await usage(gw, key.key as string)).json().customer.credits.balance).toBe(10);
      await hook.until(1);
      const [event] = hook.events();
      expect(event?.type).toBe('credits.refilled');
      expect(event?.data).toMatchObject({ customerId: customer.id, refilled: 10, balance: 10 });
      expect(event?.data).not.toHaveProperty('keyId');
    } finally {
      await hook.close();
    }
  });

  it('shows a key its calendar: its customer’s zone as given, anchor day, and when its day and month reset', async () => {
    // 15:30 in Kolkata (UTC+05:30) on 26 November 2026.
    const now = Date.parse('2026-11-26T10:00:00.000Z');
    const gw = await gateways.start({ redisUrl: null, now: () => now });
    const customer = await post(gw, '/admin/customers', {
      name: 'Chai',
      plan: 'pro',
      billing: { anchorDay: 15, timeZone: 'Asia/Kolkata' },
    });
    const key = await post(gw, '/admin/keys', { customerId: customer.id });
    await gw.app.inject({ url: '/v1/pets', headers: bearer(key.key as string) });
    const body = (await usage(gw, key.key as string)).json();
    expect(body.key.calendar).toEqual({
      timeZone: 'Asia/Kolkata',
      anchorDay: 15,
      dayResetsAt: '2026-11-26T18:30:00.000Z',
      monthResetsAt: '2026-12-14T18:30:00.000Z',
    });
    expect(body.customer.windows.day.resetAt).toBe(body.key.calendar.dayResetsAt);
    expect(body.customer.billingPeriod.end).toBe(body.key.calendar.monthResetsAt);

    const own = await post(gw, '/admin/keys', { plan: 'free' });
    expect((await usage(gw, own.key as string)).json().key.calendar).toEqual({
      timeZone: 'UTC',
      anchorDay: 1,
      dayResetsAt: '2026-11-27T00:00:00.000Z',
      monthResetsAt: '2026-12-01T00:00:00.000Z',
    });
  });

  it('of a key of no customer: its own windows and the UTC month, no customer', async () => {
    const gw = await gateways.start({ redisUrl: null });
    const key = await post(gw, '/admin/keys', { plan: 'free' });
    await gw.app.inject({ url: '/v1/pets', headers: bearer(key.key as string) });
    const body = (await usage(gw, key.key as string)).json();
    const now = new Date();
    const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString();
    expect(body.customer).toBeUndefined();
    expect(body.key.billingPeriod).toMatchObject({ start: monthStart, units: 1 });
    expect(body.key.windows.day).toMatchObject({ limit: 1000, used: 1, remaining: 999 });
  });

  it('read N times leaves every window and the history as they were, and its own limit refuses in the Error shape', async () => {
    const gw = await gateways.start({ env: { BAN_THRESHOLD: '2' } });
    const customer = await post(gw, '/admin/customers', { name: 'Quiet', plan: 'free' });
    const key = await post(gw, '/admin/keys', { customerId: customer.id });
    await gw.app.inject({ url: '/v1/pets', headers: bearer(key.key as string) });
    const before = await adminGet(gw, `/admin/keys/${key.id}/usage`);

    const reads = await Promise.all(
      Array.from({ length: USAGE_READS_PER_MINUTE + 5 }, () => usage(gw, key.key as string)),
    );
    const statuses = reads.map((r) => r.statusCode);
    expect(statuses.filter((s) => s === 200)).toHaveLength(USAGE_READS_PER_MINUTE);
    const refused = reads.filter((r) => r.statusCode === 429);
    expect(refused).toHaveLength(5);
    for (const r of refused) {
      expectError(r, 429, 'rate_limit_exceeded');
      // The rest of the minute the reads began, in whole seconds: more than 1 unless they took 59 s.
      expect(Number(r.headers['retry-after'])).toBeGreaterThan(1);
      expect(Number(r.headers['retry-after'])).toBeLessThanOrEqual(60);
    }

    const after = await adminGet(gw, `/admin/keys/${key.id}/usage`);
    expectSameWindows(after.windows, before.windows);
    expectSameWindows(
      (after.customer as { windows: unknown }).windows,
      (before.customer as { windows: unknown }).windows,
    );
    expect(after).toMatchObject({ ban: null, refusals: 0 });
    const history = await adminGet(gw, `/admin/keys/${key.id}/usage/history`);
    expect(history.totals).toMatchObject({ admitted: 1, units: 1, limited: 0, banned: 0 });
    // The key still works: its quota is whole and no ban was started by the refused reads.
    expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key.key as string) })).statusCode).toBe(200);
  });

  // Per key, not per replica or customer: one key polling to its limit leaves another's reads whole.
  it('counts its own limit per key: two keys of one customer on one replica each read their full allowance', async () => {
    const gw = await gateways.start({ redisUrl: null });
    const customer = await post(gw, '/admin/customers', { name: 'Two', plan: 'pro' });
    const [first, second] = [
      await post(gw, '/admin/keys', { customerId: customer.id }),
      await post(gw, '/admin/keys', { customerId: customer.id }),
    ];
    const statuses = async (key: string, n: number) =>
      (await Promise.all(Array.from({ length: n }, () => usage(gw, key)))).map((r) => r.statusCode);
    expect(await statuses(first?.key as string, USAGE_READS_PER_MINUTE)).toEqual(
      Array(USAGE_READS_PER_MINUTE).fill(200),
    );
    expect(await statuses(second?.key as string, USAGE_READS_PER_MINUTE)).toEqual(
      Array(USAGE_READS_PER_MINUTE).fill(200),
    );
    expectError(await usage(gw, first?.key as string), 429, 'rate_limit_exceeded');
    expectError(await usage(gw, second?.key as string), 429, 'rate_limit_exceeded');
  });

  it('answers 503 rate_limiter_unavailable while Redis is away, logging why', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ logs });
    const customer = await post(gw, '/admin/customers', { name: 'Away', plan: 'pro' });
    const key = await post(gw, '/admin/keys', { customerId: customer.id });
    expect((await usage(gw, key.key as string)).statusCode).toBe(200);
    gw.redis?.disconnect();
    const res = await usage(gw, key.key as string);
    expectError(res, 503, 'rate_limiter_unavailable');
    expect(res.json().message).toMatch(/^Cannot reach Redis to read usage/);
    expect(logs.filter((l) => l.msg === 'cannot read usage' && l.err !== undefined)).toHaveLength(1);
  });

  it('answers a banned key, with when its ban ends', async () => {
    const gw = await gateways.start({ env: { BAN_THRESHOLD: '1', BAN_GRACE_MS: '0' } });
    const key = await post(gw, '/admin/keys', { plan: 'pro', limits: { perMinute: 2 } });
    let banned = false;
    for (let i = 0; i < 10 && !banned; i++) {
      const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key.key as string) });
      banned = res.statusCode === 429 && res.json().code === 'api_key_banned';
    }
    expect(banned).toBe(true);
    const readsFrom = Date.now();
    const res = await usage(gw, key.key as string);
    expect(res.statusCode, res.body).toBe(200);
    const live = await adminGet(gw, `/admin/keys/${key.id}/usage`);
    const readsTook = Date.now() - readsFrom;
    // Each read derives the end as the gateway's now when Redis's PTTL reply is handled + that
    // PTTL, so it is late by that reply's wait (milliseconds, tens on a loaded host) and two reads
    // of one ban differ by at most the time both took, plus a millisecond of rounding. A 2 ms
    // bound failed at load 8-12 (6-10 ms apart).
    const until = Date.parse(res.json().key.ban.until);
    expect(Math.abs(until - Date.parse((live.ban as { until: string }).until))).toBeLessThanOrEqual(readsTook + 1);
    expect(until).toBeGreaterThan(Date.now());
  });

  it('is held to the key’s allowed addresses and refuses a missing or unknown key', async () => {
    const gw = await gateways.start({ redisUrl: null });
    const key = await post(gw, '/admin/keys', { plan: 'free', allowedCidrs: ['10.0.0.0/8'] });
    expectError(await usage(gw, key.key as string, '192.0.2.1'), 403, 'ip_not_allowed');
    expect((await usage(gw, key.key as string, '10.1.2.3')).statusCode).toBe(200);
    expectError(await gw.app.inject({ url: '/v1/usage' }), 401, 'missing_api_key');
  });

  /** A plans file whose plan refills its lone keys' credits: what a key that lost its customer would fall back to. */
  function creditedPlans(): string {
    const plans = join(mkdtempSync(join(tmpdir(), 'usage-plans-')), 'plans.json');
    writeFileSync(
      plans,
      JSON.stringify({
        plans: { metered: { windows: { minute: 100 }, credits: { refill: { amount: 40, every: 'day' } } } },
      }),
    );
    return plans;
  }

  // Another replica deleted the customer; the revocation of its keys has not landed yet.
  it('answers a key whose customer is gone its own windows, with no customer and no balance of its own', async () => {
    const customerStore = new MemoryCustomerStore();
    const gw = await gateways.start({ redisUrl: null, customerStore, env: { PLANS_FILE: creditedPlans() } });
    const customer = await post(gw, '/admin/customers', { name: 'Gone', plan: 'metered' });
    const key = await post(gw, '/admin/keys', { customerId: customer.id });
    expect(await customerStore.delete(customer.id as string, new Date())).toBe(true);
    const res = await usage(gw, key.key as string);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().customer).toBeUndefined();
    expect(res.json().key).not.toHaveProperty('credits');
    expect(res.json().key.calendar).toMatchObject({ timeZone: 'UTC', anchorDay: 1 });
  });

  // The windows were read under the customer the gate admitted the request with: the body names that one.
  it('answers the customer as this replica holds it, until a change to it reaches the replica', async () => {
    const customerStore = new MemoryCustomerStore();
    const gw = await gateways.start({ redisUrl: null, customerStore });
    const customer = await post(gw, '/admin/customers', { name: 'Acme', plan: 'pro' });
    const key = await post(gw, '/admin/keys', { customerId: customer.id });
    expect((await usage(gw, key.key as string)).json().customer.name).toBe('Acme');
    // Changed by another replica whose announcement this one has not had.
    await customerStore.update(customer.id as string, { name: 'Acme Renamed' }, new Date());
    expect((await usage(gw, key.key as string)).json().customer.name).toBe('Acme');
  });

  // A replica whose clock runs ahead writes an hour this one has not reached: not billed here yet.
  it('sums the period up to the hour holding now, as the admin history does, not hours written ahead of it', async () => {
    const at = Date.parse('2026-11-26T10:00:00.000Z');
    let now = at;
    const gw = await gateways.start({ redisUrl: null, now: () => now });
    const key = await post(gw, '/admin/keys', { plan: 'pro' });
    await gw.app.inject({ url: '/v1/pets', headers: bearer(key.key as string) });
    now = at + 2 * 3_600_000;
    await gw.app.inject({ url: '/v1/pets', headers: bearer(key.key as string) });
    now = at;
    const res = await usage(gw, key.key as string);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().key.billingPeriod).toEqual({
      start: '2026-11-01T00:00:00.000Z',
      end: '2026-12-01T00:00:00.000Z',
      units: 1,
    });
  });
});
