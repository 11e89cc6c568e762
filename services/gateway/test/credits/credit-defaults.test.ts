import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createKey } from '../../src/keys/create-key.js';
import { ADMIN_TOKEN, bearer, type TestGateway, useGateways } from '../support/helpers.js';

/*
 * Credit terms from configuration: a plan's `credits` in PLANS_FILE are the default of its
 * customers and lone keys (their own terms win, `null` turns them off), and API_KEYS_FILE's keys
 * and customers may carry terms of their own. Seen through the gate: a request is refused 402 once
 * the refill is spent, or never when no terms are in force.
 */
const gateways = useGateways();
const dir = mkdtempSync(join(tmpdir(), 'credit-defaults-'));
const admin = bearer(ADMIN_TOKEN);

function file(name: string, content: unknown): string {
  const path = join(dir, `${name}-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, JSON.stringify(content));
  return path;
}

const PLANS = {
  plans: {
    metered: { windows: { minute: 100 }, credits: { refill: { amount: 3, every: 'day' } } },
    plain: { windows: { minute: 100 } },
  },
};

/** How many of `n` requests the key is let through before the first 402 (and that all after it are 402). */
async function admitted(gw: TestGateway, key: string, n = 6): Promise<number> {
  const statuses: number[] = [];
  for (let i = 0; i < n; i++)
    statuses.push((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode);
  const ok = statuses.filter((s) => s === 200).length;
  expect(statuses).toEqual([...Array(ok).fill(200), ...Array(n - ok).fill(402)]);
  return ok;
}

const call = (gw: TestGateway, method: 'POST' | 'PATCH' | 'GET', url: string, payload?: object) =>
  gw.admin.inject({ method, url, headers: admin, ...(payload ? { payload } : {}) });

describe('a plan’s credits (PLANS_FILE)', () => {
  it('apply to its customers and lone keys without terms of their own; their own win; null turns them off', async () => {
    const gw = await gateways.start({ redisUrl: null, env: { PLANS_FILE: file('plans', PLANS) } });
    const plans = (await call(gw, 'GET', '/admin/plans')).json();
    expect(plans.plans.find((p: { name: string }) => p.name === 'metered')?.credits).toEqual(
      PLANS.plans.metered.credits,
    );

    const customerKey = async (credits?: object | null) => {
      const customer = (
        await call(gw, 'POST', '/admin/customers', { name: 'Acme', plan: 'metered', ...(credits ? { credits } : {}) })
      ).json();
      if (credits === null)
        expect((await call(gw, 'PATCH', `/admin/customers/${customer.id}`, { credits: null })).statusCode).toBe(200);
      const key = (await call(gw, 'POST', '/admin/keys', { customerId: customer.id })).json();
      return { customer, key: String(key.key) };
    };
    const byPlan = await customerKey();
    expect(byPlan.customer.credits).toEqual(PLANS.plans.metered.credits);
    expect(await admitted(gw, byPlan.key)).toBe(3);
    expect((await call(gw, 'GET', `/admin/customers/${byPlan.customer.id}/credits`)).json()).toMatchObject({
      credits: PLANS.plans.metered.credits,
      balance: 0,
    });
    expect(await admitted(gw, (await customerKey({ refill: { amount: 5, every: 'day' } })).key)).toBe(5);
    const off = await customerKey(null);
    expect(await admitted(gw, off.key)).toBe(6);
    expect((await call(gw, 'GET', `/admin/customers/${off.customer.id}`)).json().credits).toBeUndefined();

    const lone = (await call(gw, 'POST', '/admin/keys', { plan: 'metered' })).json();
    expect(lone.credits).toEqual(PLANS.plans.metered.credits);
    expect(await admitted(gw, String(lone.key))).toBe(3);
    const plain = (await call(gw, 'POST', '/admin/keys', { plan: 'plain' })).json();
    expect(plain.credits).toBeUndefined();
    expect(await admitted(gw, String(plain.key))).toBe(6);
  });
});

describe('credits in API_KEYS_FILE', () => {
  it('takes a lone key’s and a customer’s terms from the file', async () => {
    const made = (plan: string) => createKey({ name: 'file', plan });
    const [solo, off, acme] = [made('plain'), made('metered'), made('plain')];
    const entry = ({ record }: typeof solo, extra: object) => ({
      id: record.id,
      name: record.name,
      plan: record.plan,
      sha256: record.sha256,
      ...extra,
    });
    const keys = {
      keys: [
        entry(solo, { credits: { refill: { amount: 2, every: 'day' } } }),
        entry(off, { credits: null }),
        entry(acme, { customerId: 'cus_acme' }),
      ],
      customers: [{ id: 'cus_acme', name: 'Acme', plan: 'plain', credits: { refill: { amount: 4, every: 'period' } } }],
    };
    const gw = await gateways.start({
      redisUrl: null,
      env: { PLANS_FILE: file('plans', PLANS), API_KEYS_FILE: file('keys', keys) },
    });
    expect(await admitted(gw, solo.key)).toBe(2);
    expect(await admitted(gw, off.key)).toBe(6);
    expect(await admitted(gw, acme.key)).toBe(4);
    expect((await call(gw, 'GET', `/admin/keys/${solo.record.id}/credits`)).json()).toMatchObject({ balance: 0 });
    expect((await call(gw, 'GET', '/admin/customers/cus_acme/credits')).json()).toMatchObject({ balance: 0 });
  });
});
