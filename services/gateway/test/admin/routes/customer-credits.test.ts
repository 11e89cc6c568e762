import { describe, expect, it } from 'vitest';
import { type AdminCall, adminCaller, creditReplicas, pets } from '../../support/admin.js';
import { type TestGateway, useGateways } from '../../support/helpers.js';
import { testClock } from '../../support/test-clock.js';
import { startReceiver } from '../../support/webhook-receiver.js';

/**
 * A customer's credits through the admin API and the gate: top-ups once per Idempotency-Key, the
 * balance spent by its keys' requests over two replicas, 402 credits_exhausted when it is spent,
 * refills, the ledger paged and summing to the balance.
 */
const gateways = useGateways();
async function customerWithKey(call: AdminCall, credits: object) {
  const customer = await call('POST', '/admin/customers', { name: 'Acme', plan: 'pro', credits });
  expect(customer.statusCode, customer.body).toBe(201);
  const id = String(customer.json().id);
  const key = await call('POST', '/admin/keys', { customerId: id, name: 'prod' });
  expect(key.statusCode, key.body).toBe(201);
  return { id, key: String(key.json().key) };
}

describe.each([
  ['two replicas on Redis', { redis: true }],
  ['the embedded mode', { redis: false }],
])('credits of a customer (%s)', (_label, mode) => {
  it('adds a top-up once per Idempotency-Key, spends it exactly, then refuses with 402 credits_exhausted', async () => {
    const gws = await creditReplicas(gateways, mode);
    const call = adminCaller(gws[0] as TestGateway);
    const { id, key } = await customerWithKey(call, {});
    const topUp = { amount: 20, reason: 'order 1234' };
    const first = await call('POST', `/admin/customers/${id}/credits`, topUp, { 'idempotency-key': 'order-1234' });
    expect(first.statusCode, first.body).toBe(201);
    expect(first.json()).toMatchObject({ customerId: id, type: 'topup', amount: 20, reason: 'order 1234' });
    const again = await call('POST', `/admin/customers/${id}/credits`, topUp, { 'idempotency-key': 'order-1234' });
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json()).toEqual(first.json());
    const reused = await call(
      'POST',
      `/admin/customers/${id}/credits`,
      { ...topUp, amount: 5 },
      { 'idempotency-key': 'order-1234' },
    );
    expect(reused.statusCode).toBe(422);
    expect((await call('GET', `/admin/customers/${id}/credits`)).json()).toMatchObject({
      balance: 20,
      nextRefillAt: null,
    });

    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) => pets(gws[i % gws.length] as TestGateway, key)),
    );
    expect(answers.filter((r) => r.statusCode === 200)).toHaveLength(20);
    const refused = answers.filter((r) => r.statusCode !== 200);
    expect(new Set(refused.map((r) => r.statusCode))).toEqual(new Set([402]));
    const body = refused[0]?.json();
    expect(body).toEqual({
      code: 'credits_exhausted',
      status: 402,
      message: expect.stringContaining(`customer ${id} has 0 left`),
    });
    expect(refused[0]?.headers['retry-after']).toBeUndefined();
    expect(refused[0]?.headers['ratelimit-policy']).toContain('"customer-minute";q=300');
    expect(refused[0]?.headers['x-ratelimit-remaining']).toBe('280');
    // 40 refusals with a ban threshold of 3: none counted toward a ban.
    const usage = (await call('GET', `/admin/customers/${id}/usage`)).json();
    expect(usage.windows.minute).toMatchObject({ used: 20 });

    const ledger = (await call('GET', `/admin/customers/${id}/credits/ledger`)).json();
    expect(ledger).toMatchObject({ balance: 0, openHour: { spent: 20 }, next: null });
    const sum = ledger.items.reduce((t: number, e: { amount: number }) => t + e.amount, 0) - ledger.openHour.spent;
    expect(sum).toBe(ledger.balance);
  });
});

describe('credits terms and changes, refused with 400, 404 and 409', () => {
  it.each([
    [{ refill: { amount: 0, every: 'day' } }, 'amount'],
    [{ refill: { amount: 10, every: 'week' } }, 'every'],
    [{ refill: { every: 'day' } }, 'amount'],
  ])('refuses the terms %j naming what is wrong', async (credits, named) => {
    const [gw] = await creditReplicas(gateways);
    const res = await adminCaller(gw as TestGateway)('POST', '/admin/customers', {
      name: 'Acme',
      plan: 'pro',
      credits,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'invalid_request', message: expect.stringContaining(named) });
  });

  it('refuses a change of 0, a negative top-up, an adjustment below zero, a customer without credits, an unknown one', async () => {
    const [gw] = await creditReplicas(gateways);
    const call = adminCaller(gw as TestGateway);
    const { id } = await customerWithKey(call, {});
    const post = (body: object, customer = id) => call('POST', `/admin/customers/${customer}/credits`, body);
    const refused = async (body: object, status: number, message: string, customer = id) => {
      const res = await post(body, customer);
      expect(res.statusCode, res.body).toBe(status);
      expect(res.json()).toEqual({ code: status === 400 ? 'invalid_request' : 'conflict', status, message });
    };
    await refused({ amount: 0, reason: 'x' }, 400, 'body.amount must not be 0');
    const positive = 'body.amount must be positive for a topup; take credits away with type adjustment';
    await refused({ amount: -5, reason: 'x' }, 400, positive);
    await refused({ amount: -5, reason: 'x', type: 'grant' }, 400, positive.replace('topup', 'grant'));
    expect((await post({ amount: 5, reason: 'x' })).statusCode).toBe(201);
    const below = 'The balance is 5: an adjustment of -6 would take it below zero';
    await refused({ amount: -6, reason: 'x', type: 'adjustment' }, 409, below);
    expect((await post({ amount: -5, reason: 'refund', type: 'adjustment' })).statusCode).toBe(201);
    expect((await call('GET', `/admin/customers/${id}/credits`)).json()).toMatchObject({ balance: 0 });
    const plain = await customerWithKey(call, {});
    await call('PATCH', `/admin/customers/${plain.id}`, { credits: null });
    const none = `Customer ${plain.id} spends no credits: give it credits terms first (PATCH /admin/customers/${plain.id} {"credits": {}})`;
    await refused({ amount: 5, reason: 'x' }, 409, none, plain.id);
    expect((await post({ amount: 5, reason: 'x' }, 'cus_nobody')).statusCode).toBe(404);
    expect((await call('GET', '/admin/customers/cus_nobody/credits')).statusCode).toBe(404);
    // An id no customer could have is refused before any store is asked.
    const long = 'c'.repeat(65);
    for (const [method, url] of [
      ['GET', `/admin/customers/${long}/credits`],
      ['GET', `/admin/customers/${long}/credits/ledger`],
      ['POST', `/admin/customers/${long}/credits`],
      ['GET', `/admin/keys/${long}/credits`],
      ['GET', `/admin/keys/${long}/credits/ledger`],
      ['POST', `/admin/keys/${long}/credits`],
    ] as const) {
      const res = await call(method, url, method === 'POST' ? { amount: 5, reason: 'x' } : undefined);
      expect(res.statusCode, `${method} ${url}`).toBe(400);
    }
    const badCursor = await call('GET', `/admin/customers/${id}/credits/ledger?after=nonsense`);
    expect(badCursor.statusCode).toBe(400);
    expect(badCursor.json().message).toMatch(/^after: ./);
  });
});

const LOCAL_HOOKS = { WEBHOOKS_ALLOW_INSECURE: 'true', WEBHOOKS_ALLOW_PRIVATE: 'true' };

describe('changes by hand: what each answers, logs and announces', () => {
  it('makes each change under a reference of its own, audits it, and sends the events it crosses', async () => {
    const clock = testClock();
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ redisUrl: null, env: LOCAL_HOOKS, now: clock.now, logs });
    const call = adminCaller(gw);
    const hook = await startReceiver();
    try {
      const events = ['credits.low', 'credits.exhausted', 'credits.refilled'];
      expect((await call('POST', '/admin/webhooks', { url: hook.url, events })).statusCode).toBe(201);
      const { id } = await customerWithKey(call, {});
      const post = async (amount: number, type: string) => {
        const res = await call('POST', `/admin/customers/${id}/credits`, { amount, reason: 'by hand', type });
        expect(res.statusCode, res.body).toBe(201);
        return res.json();
      };
      expect(await post(10, 'topup')).toEqual({
        ref: expect.stringMatching(/^crd_[\w-]{16}$/),
        customerId: id,
        type: 'topup',
        amount: 10,
        reason: 'by hand',
        at: new Date(clock.now()).toISOString(),
      });
      // From 10 after the top-up: 80 % used (the default warning) at 2, exhausted at 0; a change
      // refused, or one that raises the balance, crosses nothing.
      const made = [await post(-8, 'adjustment'), await post(-1, 'adjustment'), await post(-1, 'adjustment')];
      expect(
        (await call('POST', `/admin/customers/${id}/credits`, { amount: -1, reason: 'x', type: 'adjustment' }))
          .statusCode,
      ).toBe(409);
      made.push(await post(4, 'grant'));
      await hook.until(2);
      expect(hook.events().map((e) => [e.type, e.data.customerId, e.data.threshold, e.data.balance])).toEqual([
        ['credits.low', id, 80, 2],
        ['credits.exhausted', id, undefined, 0],
      ]);
      const { items } = (await call('GET', `/admin/customers/${id}/credits/ledger`)).json();
      expect(items.map((e: { amount: number }) => e.amount)).toEqual([4, -1, -1, -8, 10]);
      expect(new Set(items.map((e: { ref: string }) => e.ref)).size).toBe(5);
      expect(items.slice(0, 4).map((e: { ref: string }) => e.ref)).toEqual(made.reverse().map((m) => m.ref));
      const audits = logs.filter((l) => l.audit === 'credits.adjusted');
      expect(audits.map(({ customerId, type, amount, ref }) => ({ customerId, type, amount, ref }))).toEqual(
        [...items].reverse().map((e: { type: string; amount: number; ref: string }) => ({
          customerId: id,
          type: e.type,
          amount: e.amount,
          ref: e.ref,
        })),
      );
      expect(hook.events()).toHaveLength(2);
    } finally {
      await hook.close();
    }
  });
});

describe('refills through the gate', () => {
  it('refills each day, and a 402 says when in Retry-After', async () => {
    const clock = testClock();
    const [gw] = await creditReplicas(gateways, { now: clock.now });
    const call = adminCaller(gw as TestGateway);
    const { id, key } = await customerWithKey(call, { refill: { amount: 2, every: 'day' } });
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await pets(gw as TestGateway, key)).statusCode);
    expect(statuses).toEqual([200, 200, 402]);
    const refused = await pets(gw as TestGateway, key);
    const tomorrow = Math.ceil(clock.now() / 86_400_000) * 86_400_000;
    expect(Number(refused.headers['retry-after'])).toBe(Math.ceil((tomorrow - clock.now()) / 1000));
    await clock.advance(tomorrow - clock.now());
    expect((await pets(gw as TestGateway, key)).statusCode).toBe(200);
    const balance = (await call('GET', `/admin/customers/${id}/credits`)).json();
    expect(balance).toMatchObject({ balance: 1, credits: { refill: { amount: 2, every: 'day' } } });
    expect(balance.nextRefillAt).toBe(new Date(tomorrow + 86_400_000).toISOString());
  });
});

describe.each([
  ['two replicas on Redis', true],
  ['the embedded mode', false],
])('a refill every billing period (%s)', (_label, redis) => {
  // A period is refilled once, whatever its name's history (credits.md): a refill is keyed on the
  // period's start instant, so an anchor moved to a period that starts earlier, or back to the
  // one already refilled, refills nothing, however often it moves.
  it('refills a period once while its anchor day moves back and forth, and the next period on time', async () => {
    const clock = testClock();
    const gws = await creditReplicas(gateways, { redis, now: clock.now });
    const call = adminCaller(gws[0] as TestGateway);
    // The anchor whose period started last (today's date, at most the 28th), and one that started before it.
    const later = Math.min(new Date(clock.now()).getUTCDate(), 28);
    const earlier = later === 1 ? 2 : 1;
    const { id, key } = await customerWithKey(call, { refill: { amount: 3, every: 'period' } });
    expect((await call('PATCH', `/admin/customers/${id}`, { billing: { anchorDay: later } })).statusCode).toBe(200);
    const served = async () => {
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await pets(gws[i % gws.length] as TestGateway, key)).statusCode);
      return statuses;
    };
    expect(await served()).toEqual([200, 200, 200, 402]);
    for (let i = 0; i < 5; i++) {
      for (const anchorDay of [earlier, later]) {
        const moved = await call('PATCH', `/admin/customers/${id}`, { billing: { anchorDay } });
        expect(moved.statusCode, moved.body).toBe(200);
        expect(await served()).toEqual([402, 402, 402, 402]);
      }
    }
    const refills = async () =>
      (await call('GET', `/admin/customers/${id}/credits/ledger?limit=500`))
        .json()
        .items.filter((e: { type: string }) => e.type === 'refill');
    expect(await refills()).toHaveLength(1);
    // The next period, from the anchor in force, refills as it starts.
    const { nextRefillAt } = (await call('GET', `/admin/customers/${id}/credits`)).json();
    await clock.moveTo(Date.parse(nextRefillAt));
    expect(await served()).toEqual([200, 200, 200, 402]);
    expect(await refills()).toHaveLength(2);
  });
});
