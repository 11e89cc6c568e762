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

describe('back to the plan’s terms ("credits": "plan")', () => {
  it('drops a customer’s own terms or its null: the plan’s apply, shown and spent; the balance and ledger stay', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ redisUrl: null, env: { PLANS_FILE: file('plans', PLANS) }, logs });
    const customer = (
      await call(gw, 'POST', '/admin/customers', { name: 'Acme', plan: 'metered', credits: {} })
    ).json();
    const key = String((await call(gw, 'POST', '/admin/keys', { customerId: customer.id })).json().key);
    // Terms of its own without a refill: a top-up of 1 is all it may spend.
    const topup = await call(gw, 'POST', `/admin/customers/${customer.id}/credits`, { amount: 1, reason: 'trial' });
    expect(topup.statusCode, topup.body).toBe(201);
    expect(await admitted(gw, key, 2)).toBe(1);

    const back = await call(gw, 'PATCH', `/admin/customers/${customer.id}`, { credits: 'plan' });
    expect(back.statusCode, back.body).toBe(200);
    expect(back.json().credits).toEqual(PLANS.plans.metered.credits);
    expect((await call(gw, 'GET', `/admin/customers/${customer.id}`)).json().credits).toEqual(
      PLANS.plans.metered.credits,
    );
    // The plan's daily refill of 3, applied at the first use after the change.
    expect(await admitted(gw, key)).toBe(3);
    const balance = (await call(gw, 'GET', `/admin/customers/${customer.id}/credits`)).json();
    expect(balance).toMatchObject({ credits: PLANS.plans.metered.credits, balance: 0 });
    expect(balance.nextRefillAt).not.toBeNull();
    const usage = await gw.app.inject({ url: '/v1/usage', headers: bearer(key) });
    expect(usage.json().customer.credits).toEqual({ balance: 0, nextRefillAt: balance.nextRefillAt });
    const ledger = (await call(gw, 'GET', `/admin/customers/${customer.id}/credits/ledger`)).json();
    expect(ledger.items.map((e: { type: string; amount: number }) => [e.type, e.amount])).toEqual([
      ['refill', 3],
      ['topup', 1],
    ]);
    expect(logs.filter((l) => l.audit === 'customer.updated')).toMatchObject([
      { changed: ['credits'], credits: 'plan' },
    ]);

    // From null (the plan's turned off) back to the plan's: it spends again.
    const off = (await call(gw, 'POST', '/admin/customers', { name: 'Off', plan: 'metered' })).json();
    const offKey = String((await call(gw, 'POST', '/admin/keys', { customerId: off.id })).json().key);
    expect((await call(gw, 'PATCH', `/admin/customers/${off.id}`, { credits: null })).statusCode).toBe(200);
    expect(await admitted(gw, offKey, 4)).toBe(4);
    expect((await call(gw, 'PATCH', `/admin/customers/${off.id}`, { credits: 'plan' })).json().credits).toEqual(
      PLANS.plans.metered.credits,
    );
    expect(await admitted(gw, offKey)).toBe(3);

    // On a plan without terms, the plan's are none: it spends no credits, its balance stays.
    const plain = (await call(gw, 'POST', '/admin/customers', { name: 'Plain', plan: 'plain', credits: {} })).json();
    const plainBack = await call(gw, 'PATCH', `/admin/customers/${plain.id}`, { credits: 'plan' });
    expect(plainBack.statusCode, plainBack.body).toBe(200);
    expect(plainBack.json().credits).toBeUndefined();
    expect((await call(gw, 'PATCH', `/admin/customers/${plain.id}`, { credits: 'planned' })).statusCode).toBe(400);
  });

  it('drops a lone key’s own terms: its plan’s apply; a key of a customer may drop its out-of-force ones', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ env: { PLANS_FILE: file('plans', PLANS) }, logs });
    const lone = (await call(gw, 'POST', '/admin/keys', { plan: 'metered' })).json();
    expect((await call(gw, 'PATCH', `/admin/keys/${lone.id}`, { credits: {} })).json().credits).toEqual({});
    expect(await admitted(gw, String(lone.key), 2)).toBe(0);

    const back = await call(gw, 'PATCH', `/admin/keys/${lone.id}`, { credits: 'plan' });
    expect(back.statusCode, back.body).toBe(200);
    expect(back.json().credits).toEqual(PLANS.plans.metered.credits);
    expect((await call(gw, 'GET', `/admin/keys/${lone.id}`)).json().credits).toEqual(PLANS.plans.metered.credits);
    expect(await admitted(gw, String(lone.key))).toBe(3);
    expect((await call(gw, 'GET', `/admin/keys/${lone.id}/credits`)).json()).toMatchObject({
      credits: PLANS.plans.metered.credits,
      balance: 0,
    });
    expect(logs.filter((l) => l.audit === 'key.updated' && l.keyId === lone.id)).toMatchObject([
      { changed: ['credits'], credits: {} },
      { changed: ['credits'], credits: 'plan' },
    ]);

    // A key of a customer has no terms in force of its own: "plan" is accepted as null is, and
    // it still spends its customer's.
    const customer = (await call(gw, 'POST', '/admin/customers', { name: 'Acme', plan: 'plain' })).json();
    const owned = (await call(gw, 'POST', '/admin/keys', { customerId: customer.id })).json();
    const kept = await call(gw, 'PATCH', `/admin/keys/${owned.id}`, { credits: 'plan' });
    expect(kept.statusCode, kept.body).toBe(200);
    expect(kept.json().credits).toBeUndefined();
  });
});

describe('whose terms a view shows: ownCredits beside the terms in force', () => {
  it('a customer’s: its own object, null when it turned its plan’s off, absent when it follows its plan', async () => {
    const gw = await gateways.start({ redisUrl: null, env: { PLANS_FILE: file('plans', PLANS) } });
    const own = { refill: { amount: 7, every: 'period' } };
    const made = (await call(gw, 'POST', '/admin/customers', { name: 'Acme', plan: 'metered' })).json();
    expect(made.credits).toEqual(PLANS.plans.metered.credits);
    expect(made).not.toHaveProperty('ownCredits');
    const path = `/admin/customers/${made.id}`;
    const after = patchCredits(gw, path, '/admin/customers?plan=metered');

    const withOwn = await after(own);
    expect(withOwn.credits).toEqual(own);
    expect(withOwn.ownCredits).toEqual(own);
    const off = await after(null);
    expect(off).not.toHaveProperty('credits');
    expect(off).toHaveProperty('ownCredits', null);
    const byPlan = await after('plan');
    expect(byPlan.credits).toEqual(PLANS.plans.metered.credits);
    expect(byPlan).not.toHaveProperty('ownCredits');
    // Its own terms equal to its plan's are still its own: they stay through a change of PLANS_FILE.
    const same = await after(PLANS.plans.metered.credits);
    expect(same.ownCredits).toEqual(PLANS.plans.metered.credits);
  });

  it('a lone key’s, in its view, its page and its rotation; a key of a customer shows none', async () => {
    const gw = await gateways.start({ redisUrl: null, env: { PLANS_FILE: file('plans', PLANS) } });
    const own = { refill: { amount: 9, every: 'day' } };
    const made = (await call(gw, 'POST', '/admin/keys', { plan: 'metered', name: 'lone' })).json();
    expect(made.credits).toEqual(PLANS.plans.metered.credits);
    expect(made).not.toHaveProperty('ownCredits');
    const path = `/admin/keys/${made.id}`;
    const after = patchCredits(gw, path, '/admin/keys?name=lone');

    const withOwn = await after(own);
    expect(withOwn.credits).toEqual(own);
    expect(withOwn.ownCredits).toEqual(own);
    const rotated = await call(gw, 'POST', `${path}/rotate`, {});
    expect(rotated.statusCode, rotated.body).toBe(200);
    expect(rotated.json()).toMatchObject({ credits: own, ownCredits: own });
    const off = await after(null);
    expect(off).not.toHaveProperty('credits');
    expect(off).toHaveProperty('ownCredits', null);
    const byPlan = await after('plan');
    expect(byPlan.credits).toEqual(PLANS.plans.metered.credits);
    expect(byPlan).not.toHaveProperty('ownCredits');

    // Its null kept while it belongs to a customer is not in force, so not shown; it is again
    // once the key stands for itself.
    await after(null);
    const customer = (await call(gw, 'POST', '/admin/customers', { name: 'Acme', plan: 'metered' })).json();
    const joined = await call(gw, 'PATCH', path, { customerId: customer.id });
    expect(joined.statusCode, joined.body).toBe(200);
    expect(joined.json()).not.toHaveProperty('credits');
    expect(joined.json()).not.toHaveProperty('ownCredits');
    const alone = await call(gw, 'PATCH', path, { customerId: null });
    expect(alone.json()).toHaveProperty('ownCredits', null);
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

    // The file, not the admin API, says what its records are: "plan" is refused as any change is.
    const fileKey = await call(gw, 'PATCH', `/admin/keys/${solo.record.id}`, { credits: 'plan' });
    expect(fileKey.statusCode, fileKey.body).toBe(409);
    expect(fileKey.json().message).toContain('is managed in a file (API_KEYS_FILE)');
    const fileCustomer = await call(gw, 'PATCH', '/admin/customers/cus_acme', { credits: 'plan' });
    expect(fileCustomer.statusCode, fileCustomer.body).toBe(409);
    expect(fileCustomer.json().message).toContain('is managed in a file (API_KEYS_FILE)');
    expect((await call(gw, 'GET', `/admin/keys/${solo.record.id}`)).json().credits).toEqual({
      refill: { amount: 2, every: 'day' },
    });
    expect((await call(gw, 'GET', '/admin/customers/cus_acme')).json().credits).toEqual({
      refill: { amount: 4, every: 'period' },
    });
    // Whose they are, as the file says: its own, its null (the plan's turned off), or its customer's.
    expect((await call(gw, 'GET', `/admin/keys/${solo.record.id}`)).json().ownCredits).toEqual({
      refill: { amount: 2, every: 'day' },
    });
    const offView = (await call(gw, 'GET', `/admin/keys/${off.record.id}`)).json();
    expect(offView).toHaveProperty('ownCredits', null);
    expect(offView).not.toHaveProperty('credits');
    expect((await call(gw, 'GET', `/admin/keys/${acme.record.id}`)).json()).not.toHaveProperty('ownCredits');
    expect((await call(gw, 'GET', '/admin/customers/cus_acme')).json().ownCredits).toEqual({
      refill: { amount: 4, every: 'period' },
    });
  });
});

/**
 * PATCHes `path`'s credits and answers the record as a later GET reads it, after checking the
 * PATCH answered the same and `list` (a list holding only it) lists it so: what the route answers
 * is what is stored, in every view.
 */
function patchCredits(gw: TestGateway, path: string, list: string) {
  return async (credits: object | null | 'plan') => {
    const patched = await call(gw, 'PATCH', path, { credits });
    expect(patched.statusCode, patched.body).toBe(200);
    const read = (await call(gw, 'GET', path)).json();
    expect(read).toEqual(patched.json());
    const listed = (await call(gw, 'GET', list)).json();
    expect(listed.items).toEqual([read]);
    return read;
  };
}
