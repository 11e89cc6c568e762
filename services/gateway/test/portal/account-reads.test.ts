import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_GRACE_SECONDS, MAX_GRACE_SECONDS } from '../../src/keys/key-operations.js';
import { expectError } from '../support/admin.js';
import { bearer, useGateways } from '../support/helpers.js';
import { admin, adminPost, signIn } from './support.js';

/*
 * What a signed-in customer reads, to the field: its session (plan, maxKeys, scopes, grace), its
 * billing period and units so far on a fixed clock, one key's history, a limiter that fails
 * (503), and the invoice of the previous period or as CSV.
 */

const gateways = useGateways();
const at = (text: string) => Date.parse(text);

function pricedPlans(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'portal-reads-')), 'plans.json');
  const price = { currency: 'EUR', base: 4900, includedUnits: 10, unitPrice: 50, per: 4 };
  writeFileSync(path, JSON.stringify({ plans: { metered: { windows: { minute: 1000 }, price } } }));
  return path;
}

describe('GET /portal/api/session', () => {
  it('says who is signed in, the plan’s maxKeys and scopes, and the rotation grace the page offers', async () => {
    const gw = await gateways.start({ redisUrl: null });
    const billing = { anchorDay: 15, timeZone: 'Europe/Paris' };
    const customer = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro', billing });
    const browser = await signIn(gw, customer.id as string);
    const body = (await browser.get('/portal/api/session')).json();
    expect(body).toEqual({
      customer: { id: customer.id, name: 'Acme', plan: 'pro', billing: expect.objectContaining(billing) },
      csrfToken: browser.csrf,
      expiresAt: expect.any(String),
      maxKeys: 5,
      scopes: ['pets:read', 'pets:write'],
      grace: { defaultSeconds: DEFAULT_GRACE_SECONDS, maxSeconds: MAX_GRACE_SECONDS },
    });
  });
});

describe('GET /portal/api/usage', () => {
  it('gives the billing period in the customer’s zone and its units so far, to the hour now', async () => {
    const gw = await gateways.start({ redisUrl: null, now: () => at('2026-11-26T10:30:00Z') });
    const customer = await adminPost(gw, '/admin/customers', {
      name: 'Acme',
      plan: 'pro',
      billing: { anchorDay: 15, timeZone: 'Europe/Paris' },
    });
    const id = customer.id as string;
    // Before the period (22:59 UTC on the 14th is still the 14th in Paris), in it, and this hour.
    for (const [instant, units] of [
      ['2026-11-14T22:59:59Z', 7],
      ['2026-11-14T23:00:00Z', 3],
      ['2026-11-26T10:10:00Z', 2],
    ] as const) {
      gw.deps.history.count(id, 'admitted', units, at(instant));
    }
    const browser = await signIn(gw, id);
    const usage = (await browser.get('/portal/api/usage')).json();
    expect(usage.billingPeriod).toEqual({
      start: '2026-11-14T23:00:00.000Z',
      end: '2026-12-14T23:00:00.000Z',
      units: 5,
    });
    expect(usage).toMatchObject({ id, plan: 'pro' });
  });

  it('answers 503 rate_limiter_unavailable when the limiter cannot be read, with a log line', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ redisUrl: null, logs });
    const customer = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro' });
    const browser = await signIn(gw, customer.id as string);
    const limiter = gw.deps.limiter;
    gw.deps.limiter = new Proxy(limiter, {
      get: (target, name, receiver) =>
        name === 'customerUsage'
          ? async () => {
              throw new Error('limiter away');
            }
          : Reflect.get(target, name, receiver),
    });
    const res = await browser.get('/portal/api/usage');
    expectError(res, 503, 'rate_limiter_unavailable');
    expect(res.json().message).toMatch(/^Cannot reach Redis to read usage/);
    expect(logs.filter((l) => l.msg === 'cannot read usage')).toHaveLength(1);
  });
});

describe('GET /portal/api/usage/history?keyId=', () => {
  it('is that key’s history alone', async () => {
    const gw = await gateways.start({ redisUrl: null });
    const customer = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro' });
    const a = await adminPost(gw, '/admin/keys', { customerId: customer.id, name: 'a' });
    const b = await adminPost(gw, '/admin/keys', { customerId: customer.id, name: 'b' });
    for (let i = 0; i < 3; i++) await gw.app.inject({ url: '/v1/pets', headers: bearer(a.key as string) });
    await gw.app.inject({ url: '/v1/pets', headers: bearer(b.key as string) });
    const browser = await signIn(gw, customer.id as string);
    const units = async (query: string) =>
      (await browser.get(`/portal/api/usage/history${query}`)).json().totals.units as number;
    expect([await units(''), await units(`?keyId=${a.id}`), await units(`?keyId=${b.id}`)]).toEqual([4, 3, 1]);
  });
});

describe('GET /portal/api/invoice-preview', () => {
  it('is the admin API’s for the previous period too, and CSV when the browser accepts text/csv', async () => {
    const gw = await gateways.start({
      redisUrl: null,
      now: () => at('2026-11-26T10:30:00Z'),
      env: { PLANS_FILE: pricedPlans(), USAGE_HISTORY_DAYS: '90' },
    });
    const customer = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'metered' });
    const id = customer.id as string;
    gw.deps.history.count(id, 'admitted', 4, at('2026-10-20T10:00:00Z'));
    gw.deps.history.count(id, 'admitted', 9, at('2026-11-20T10:00:00Z'));
    const browser = await signIn(gw, id);
    const adminPath = `/admin/customers/${id}/invoice-preview`;
    const previous = await browser.get('/portal/api/invoice-preview?period=previous');
    expect(previous.statusCode, previous.body).toBe(200);
    expect(previous.json()).toEqual(
      (await gw.admin.inject({ url: `${adminPath}?period=previous`, headers: admin })).json(),
    );
    expect(previous.json().units).toBe(4);
    expect((await browser.get('/portal/api/invoice-preview')).json().units).toBe(9);
    const csv = await gw.portal.inject({
      url: '/portal/api/invoice-preview',
      headers: { cookie: browser.cookie, accept: 'text/csv' },
    });
    expect(csv.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(csv.body).toBe((await gw.admin.inject({ url: `${adminPath}?format=csv`, headers: admin })).body);
  });
});
