import { describe, expect, it } from 'vitest';
import { type AdminCall, adminCaller, creditReplicas, pets } from '../../support/admin.js';
import { type TestGateway, useGateways } from '../../support/helpers.js';
import { testClock } from '../../support/test-clock.js';
import { startReceiver } from '../../support/webhook-receiver.js';

/**
 * A lone key's credits (a key without a customer stands for itself): its terms set with PATCH
 * /admin/keys/:id, its balance, ledger and top-ups under /admin/keys/:id/credits with the customer
 * routes' contract, spent by its own requests; a key of a customer answers 409 naming its customer.
 */
const gateways = useGateways();
/** A pro key of no customer with these credit terms (set as an operator would: PATCH). */
async function loneKey(call: AdminCall, credits: object | null) {
  const made = await call('POST', '/admin/keys', { plan: 'pro', name: 'solo' });
  expect(made.statusCode, made.body).toBe(201);
  const id = String(made.json().id);
  const patched = await call('PATCH', `/admin/keys/${id}`, { credits });
  expect(patched.statusCode, patched.body).toBe(200);
  return { id, key: String(made.json().key), view: patched.json() };
}

describe.each([
  ['two replicas on Redis', { redis: true }],
  ['the embedded mode', { redis: false }],
])('credits of a lone key (%s)', (_label, mode) => {
  it('adds a top-up once per Idempotency-Key, spends it exactly, then refuses with 402 credits_exhausted', async () => {
    const gws = await creditReplicas(gateways, mode);
    const call = adminCaller(gws[0] as TestGateway);
    const { id, key, view } = await loneKey(call, {});
    expect(view.credits).toEqual({});
    const topUp = { amount: 20, reason: 'order 77' };
    const first = await call('POST', `/admin/keys/${id}/credits`, topUp, { 'idempotency-key': 'order-77' });
    expect(first.statusCode, first.body).toBe(201);
    expect(first.json()).toMatchObject({ keyId: id, type: 'topup', amount: 20, reason: 'order 77' });
    expect(first.json().customerId).toBeUndefined();
    const again = await call('POST', `/admin/keys/${id}/credits`, topUp, { 'idempotency-key': 'order-77' });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json()).toEqual(first.json());
    const reused = await call(
      'POST',
      `/admin/keys/${id}/credits`,
      { ...topUp, amount: 5 },
      { 'idempotency-key': 'order-77' },
    );
    expect(reused.statusCode).toBe(422);
    expect((await call('GET', `/admin/keys/${id}/credits`)).json()).toMatchObject({
      id,
      credits: {},
      balance: 20,
      nextRefillAt: null,
    });

    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) => pets(gws[i % gws.length] as TestGateway, key)),
    );
    expect(answers.filter((r) => r.statusCode === 200)).toHaveLength(20);
    const refused = answers.filter((r) => r.statusCode !== 200);
    expect(new Set(refused.map((r) => r.statusCode))).toEqual(new Set([402]));
    expect(refused[0]?.json()).toMatchObject({
      code: 'credits_exhausted',
      message: expect.stringContaining(`key ${id} has 0 left`),
    });

    const ledger = (await call('GET', `/admin/keys/${id}/credits/ledger?limit=1`)).json();
    expect(ledger).toMatchObject({ id, balance: 0, openHour: { spent: 20 } });
    expect(ledger.items).toEqual([expect.objectContaining({ type: 'topup', amount: 20, ref: first.json().ref })]);
  });
});

describe('a lone key: terms, refills and refusals', () => {
  it('refills each UTC day with the terms PATCH set, and credits: null stops spending', async () => {
    const clock = testClock();
    const [gw] = await creditReplicas(gateways, { now: clock.now });
    const call = adminCaller(gw as TestGateway);
    const { id, key } = await loneKey(call, { refill: { amount: 2, every: 'day' } });
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await pets(gw as TestGateway, key)).statusCode);
    expect(statuses).toEqual([200, 200, 402]);
    const tomorrow = Math.ceil(clock.now() / 86_400_000) * 86_400_000;
    await clock.advance(tomorrow - clock.now());
    expect((await pets(gw as TestGateway, key)).statusCode).toBe(200);
    const balance = (await call('GET', `/admin/keys/${id}/credits`)).json();
    expect(balance).toMatchObject({ balance: 1, credits: { refill: { amount: 2, every: 'day' } } });
    expect(balance.nextRefillAt).toBe(new Date(tomorrow + 86_400_000).toISOString());
    // The hour being spent: its bounds, and its spend so far (not yet a ledger entry).
    const hour = { start: new Date(tomorrow).toISOString(), end: new Date(tomorrow + 3_600_000).toISOString() };
    expect(balance.openHour).toEqual({ ...hour, spent: 1 });
    // Yesterday's hour closed into a spend entry with its end; a refill has none.
    const { items } = (await call('GET', `/admin/keys/${id}/credits/ledger`)).json();
    expect(items.map((e: object) => Object.keys(e).sort().join())).toEqual([
      'amount,at,id,period,type',
      'amount,at,end,id,type',
      'amount,at,id,period,type',
    ]);
    const spend = items[1];
    expect(Date.parse(spend.end) - Date.parse(spend.at)).toBe(3_600_000);

    const off = await call('PATCH', `/admin/keys/${id}`, { credits: null });
    expect(off.json().credits).toBeUndefined();
    for (let i = 0; i < 3; i++) expect((await pets(gw as TestGateway, key)).statusCode).toBe(200);
    // The balance stays as it was, unspent, and a change needs terms again.
    expect((await call('GET', `/admin/keys/${id}/credits`)).json()).toMatchObject({ credits: null, balance: 1 });
    const refused = await call('POST', `/admin/keys/${id}/credits`, { amount: 5, reason: 'x' });
    expect(refused.statusCode).toBe(409);
    expect(refused.json().message).toBe(
      `Key ${id} spends no credits: give it credits terms first (PATCH /admin/keys/${id} {"credits": {}})`,
    );
  });

  it('answers 409 for a key of a customer, pointing to its customer’s credits; 404 for an unknown key', async () => {
    const [gw] = await creditReplicas(gateways);
    const call = adminCaller(gw as TestGateway);
    const customer = (await call('POST', '/admin/customers', { name: 'Acme', plan: 'pro', credits: {} })).json();
    const key = (await call('POST', '/admin/keys', { customerId: customer.id, name: 'prod' })).json();
    for (const [method, url, body] of [
      ['GET', `/admin/keys/${key.id}/credits`],
      ['GET', `/admin/keys/${key.id}/credits/ledger`],
      ['POST', `/admin/keys/${key.id}/credits`, { amount: 5, reason: 'x' }],
    ] as const) {
      const res = await call(method, url, body);
      expect(res.statusCode, url).toBe(409);
      expect(res.json()).toMatchObject({
        code: 'conflict',
        message: `Key ${key.id} belongs to customer ${customer.id} and spends its credits: see /admin/customers/${customer.id}/credits`,
      });
    }
    const patched = await call('PATCH', `/admin/keys/${key.id}`, { credits: {} });
    expect(patched.statusCode).toBe(400);
    expect(patched.json().message).toContain(`belongs to customer ${customer.id}`);
    expect((await call('GET', '/admin/keys/ask_nobody/credits')).statusCode).toBe(404);
    expect((await call('POST', '/admin/keys/ask_nobody/credits', { amount: 5, reason: 'x' })).statusCode).toBe(404);
  });
});

describe('a lone key: what a read and a change announce and log', () => {
  it('announces the refill a read applied, naming the key, and audits a change under the key', async () => {
    const logs: Record<string, unknown>[] = [];
    const env = { WEBHOOKS_ALLOW_INSECURE: 'true', WEBHOOKS_ALLOW_PRIVATE: 'true' };
    const gw = await gateways.start({ redisUrl: null, env, logs });
    const call = adminCaller(gw);
    const hook = await startReceiver();
    try {
      const events = ['credits.low', 'credits.exhausted', 'credits.refilled'];
      expect((await call('POST', '/admin/webhooks', { url: hook.url, events })).statusCode).toBe(201);
      const { id } = await loneKey(call, { refill: { amount: 4, every: 'day' } });
      // The first read of the balance applies the day's refill: announced as the limiter's would be.
      expect((await call('GET', `/admin/keys/${id}/credits`)).json()).toMatchObject({ balance: 4 });
      await hook.until(1);
      expect(hook.events().map((e) => [e.type, e.data.keyId, e.data.balance])).toEqual([['credits.refilled', id, 4]]);
      const made = await call('POST', `/admin/keys/${id}/credits`, { amount: 3, reason: 'gift', type: 'grant' });
      expect(made.statusCode, made.body).toBe(201);
      expect(made.json()).toMatchObject({ keyId: id, type: 'grant', amount: 3 });
      expect(logs.filter((l) => l.audit === 'credits.adjusted')).toMatchObject([
        { keyId: id, type: 'grant', amount: 3, ref: made.json().ref },
      ]);
      const ledger = (await call('GET', `/admin/keys/${id}/credits/ledger?limit=1`)).json();
      expect(ledger).toMatchObject({ id, balance: 7, next: expect.any(String) });
      expect(ledger.items).toEqual([{ ...made.json(), id: expect.any(String), keyId: undefined }]);
    } finally {
      await hook.close();
    }
  });
});
