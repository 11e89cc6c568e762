import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { creditCrossings } from '../../src/webhooks/intake/credit-crossings.js';
import { ADMIN_TOKEN, bearer, type TestGateway, useGateways } from '../support/helpers.js';
import { startReceiver } from '../support/webhook-receiver.js';

/*
 * The credit events: a refill, a low threshold crossed, the balance reaching zero, each once per
 * crossing, from the limiter's calls (whichever replica) and from the admin API's.
 */

describe('the credit crossings of one limiter call', () => {
  it.each([
    ['a spend across 80 % used of a refill of 100', { before: 25, after: 15, refilled: 0 }, 100, [['credits.low', 80]]],
    [
      'a spend across 80 % and 90 % at once',
      { before: 25, after: 5, refilled: 0 },
      100,
      [
        ['credits.low', 80],
        ['credits.low', 90],
      ],
    ],
    ['a spend to exactly 20 (80 % used)', { before: 21, after: 20, refilled: 0 }, 100, [['credits.low', 80]]],
    ['a spend that stays above', { before: 30, after: 21, refilled: 0 }, 100, []],
    [
      'a spend to zero, past every threshold, the call that marked the balance exhausted',
      { before: 25, after: 0, refilled: 0, exhausted: { balance: 0 } },
      100,
      [['credits.exhausted', undefined]],
    ],
    [
      'a spend to zero without a refill, marked',
      { before: 3, after: 0, refilled: 0, exhausted: { balance: 0 } },
      null,
      [['credits.exhausted', undefined]],
    ],
    // The balance was marked by an earlier call: already announced.
    ['a spend to zero, not marked by this call', { before: 3, after: 0, refilled: 0 }, null, []],
    [
      'a refusal that marked it: the balance could not pay a cost',
      { before: 1, after: 1, refilled: 0, exhausted: { balance: 1, cost: 5 } },
      null,
      [['credits.exhausted', undefined]],
    ],
    [
      'a spend without a refill or a top-up: no amount to be low against',
      { before: 30, after: 1, refilled: 0 },
      null,
      [],
    ],
    [
      'a spend without a refill, measured against the balance after the last top-up (100)',
      { before: 30, after: 15, refilled: 0, raisedTo: 100 },
      null,
      [['credits.low', 80]],
    ],
    [
      'a refill amount comes before the last top-up',
      { before: 30, after: 15, refilled: 0, raisedTo: 1000 },
      100,
      [['credits.low', 80]],
    ],
    ['a refill, then no spend', { before: 100, after: 100, refilled: 60 }, 100, [['credits.refilled', undefined]]],
    ['a top-up (the balance grows)', { before: 10, after: 50, refilled: 0 }, 100, []],
  ])('%s', (_label, batch, amount, expected) => {
    const crossed = creditCrossings(batch, amount, [80, 90]) ?? [];
    expect(crossed.map((c) => [c.type, c.data.threshold])).toEqual(expected);
  });
});

const gateways = useGateways();
const admin = bearer(ADMIN_TOKEN);
const LOCAL = { WEBHOOKS_ALLOW_INSECURE: 'true', WEBHOOKS_ALLOW_PRIVATE: 'true' };

function call(gw: TestGateway, method: string, url: string, payload?: object): Promise<LightMyRequestResponse> {
  return gw.admin.inject({ method: method as 'GET', url, headers: admin, ...(payload ? { payload } : {}) });
}

async function made(res: Promise<LightMyRequestResponse>): Promise<Record<string, string>> {
  const answer = await res;
  expect(answer.statusCode, answer.body).toBeLessThan(300);
  return answer.json();
}

/** An endpoint at `url` for the three credit events. */
async function subscribeToCredits(gw: TestGateway, url: string): Promise<void> {
  await made(
    call(gw, 'POST', '/admin/webhooks', { url, events: ['credits.low', 'credits.exhausted', 'credits.refilled'] }),
  );
}

/** Twelve GETs with the key, one after the other: their statuses. */
async function twelveRequests(gw: TestGateway, key: string): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < 12; i++)
    statuses.push((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode);
  return statuses;
}

/** A plan whose POST /v1/pets costs 5 credits, on credits of its own (no refill): the PLANS_FILE. */
function metered(): string {
  const plans = join(mkdtempSync(join(tmpdir(), 'credit-events-')), 'plans.json');
  writeFileSync(
    plans,
    JSON.stringify({
      plans: { metered: { windows: { minute: 100 }, credits: {} } },
      routeCosts: { 'POST /v1/pets': 5 },
    }),
  );
  return plans;
}

const postPet = (gw: TestGateway, key: string) =>
  gw.app.inject({ method: 'POST', url: '/v1/pets', headers: bearer(key), payload: { name: 'Rex', species: 'dog' } });

/**
 * A gateway (on `backend`) with PLANS_FILE's metered plan, a receiver subscribed to the credit
 * events, a customer on that plan with one key, and its top-up; the receiver closed after `body`.
 */
async function onMeteredCustomer(
  backend: { redisUrl?: null },
  body: (run: {
    gw: TestGateway;
    hook: Awaited<ReturnType<typeof startReceiver>>;
    customer: Record<string, string>;
    key: Record<string, string>;
    topUp: (amount: number) => Promise<Record<string, string>>;
  }) => Promise<void>,
): Promise<void> {
  const gw = await gateways.start({ ...backend, env: { ...LOCAL, PLANS_FILE: metered() } });
  const hook = await startReceiver();
  try {
    await subscribeToCredits(gw, hook.url);
    const customer = await made(call(gw, 'POST', '/admin/customers', { name: 'Acme', plan: 'metered' }));
    const key = await made(call(gw, 'POST', '/admin/keys', { customerId: customer.id, name: 'prod' }));
    const topUp = (amount: number) =>
      made(call(gw, 'POST', `/admin/customers/${customer.id}/credits`, { amount, reason: 'order' }));
    await body({ gw, hook, customer, key, topUp });
  } finally {
    await hook.close();
  }
}

describe('credit events through the gate', () => {
  it.each([
    ['Redis', {}],
    ['memory', { redisUrl: null }],
  ])(
    'measures credits.low on a balance without a refill against what it held just after its last top-up (%s)',
    async (_label, backend) => {
      await onMeteredCustomer(backend, async ({ gw, hook, key, topUp }) => {
        await topUp(10);
        // GET costs 1: low at 2 left (80 % of 10 used), exhausted at 0, the two refusals after it quiet.
        expect((await twelveRequests(gw, key.key as string)).filter((s) => s === 200)).toHaveLength(10);
        await hook.until(2);
        // A top-up of 5 from 0: 80 % of it used leaves 1.
        await topUp(5);
        for (let i = 0; i < 4; i++) {
          expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key.key as string) })).statusCode).toBe(200);
        }
        await hook.until(3);
        expect(hook.events().map((e) => [e.type, e.data.threshold, e.data.balance])).toEqual([
          ['credits.low', 80, 2],
          ['credits.exhausted', undefined, 0],
          ['credits.low', 80, 1],
        ]);
      });
    },
  );

  // Redis (the limit script's mark) and the embedded limiter (the memory ledger's): one rule.
  it.each([
    ['Redis', {}],
    ['memory', { redisUrl: null }],
  ])(
    'sends credits.exhausted once when a balance first cannot pay a request, with its balance and the cost, and again only after credits came back (%s)',
    async (_label, backend) => {
      await onMeteredCustomer(backend, async ({ gw, hook, customer, key, topUp }) => {
        await topUp(1);
        // 1 left, every request costs 5: refused for ever, announced once.
        const refused = await Promise.all(Array.from({ length: 6 }, () => postPet(gw, key.key as string)));
        expect(refused.map((r) => r.statusCode)).toEqual([402, 402, 402, 402, 402, 402]);
        await hook.until(1);
        // Credits come back, still short of 5: the next refusal announces again, with the new balance.
        await topUp(2);
        for (let i = 0; i < 3; i++) expect((await postPet(gw, key.key as string)).statusCode).toBe(402);
        await hook.until(2);
        expect(hook.events().map((e) => [e.type, e.data.balance, e.data.cost])).toEqual([
          ['credits.exhausted', 1, 5],
          ['credits.exhausted', 3, 5],
        ]);
        expect(hook.events()[0]?.data).toMatchObject({ customerId: customer.id, keyId: key.id });
      });
    },
  );

  it('sends credits.refilled, credits.low and credits.exhausted once each, naming the customer and the key', async () => {
    const gw = await gateways.start({ env: LOCAL });
    const hook = await startReceiver();
    try {
      await subscribeToCredits(gw, hook.url);
      const credits = { refill: { amount: 10, every: 'period' } };
      const customer = await made(call(gw, 'POST', '/admin/customers', { name: 'Acme', plan: 'pro', credits }));
      const key = await made(call(gw, 'POST', '/admin/keys', { customerId: customer.id, name: 'prod' }));
      const statuses = await twelveRequests(gw, key.key as string);
      expect(statuses.filter((s) => s === 200)).toHaveLength(10);
      await hook.until(3);
      const events = hook.events();
      const byType = events.map((e) => [e.type, e.data.threshold, e.data.balance]);
      // The refill first (the first request's call applied it); the default warning at 80 % used (WEBHOOKS_QUOTA_WARNING_PERCENT).
      expect(byType).toEqual([
        ['credits.refilled', undefined, 10],
        ['credits.low', 80, 2],
        ['credits.exhausted', undefined, 0],
      ]);
      for (const event of events) expect(event.data).toMatchObject({ customerId: customer.id, keyId: key.id });
    } finally {
      await hook.close();
    }
  });

  it('measures a customer back on its plan’s terms ("credits": "plan") against the plan’s refill', async () => {
    const plans = join(mkdtempSync(join(tmpdir(), 'credit-events-')), 'plans.json');
    writeFileSync(
      plans,
      JSON.stringify({
        plans: { metered: { windows: { minute: 100 }, credits: { refill: { amount: 10, every: 'period' } } } },
      }),
    );
    const gw = await gateways.start({ env: { ...LOCAL, PLANS_FILE: plans } });
    const hook = await startReceiver();
    try {
      await subscribeToCredits(gw, hook.url);
      // Its own terms (a refill of 1000 a day) until the change: under them 8 spent would cross nothing.
      const credits = { refill: { amount: 1000, every: 'day' } };
      const customer = await made(call(gw, 'POST', '/admin/customers', { name: 'Acme', plan: 'metered', credits }));
      await made(call(gw, 'PATCH', `/admin/customers/${customer.id}`, { credits: 'plan' }));
      const key = await made(call(gw, 'POST', '/admin/keys', { customerId: customer.id, name: 'prod' }));
      const statuses = await twelveRequests(gw, key.key as string);
      expect(statuses.filter((s) => s === 200)).toHaveLength(10);
      await hook.until(3);
      expect(hook.events().map((e) => [e.type, e.data.threshold, e.data.balance])).toEqual([
        ['credits.refilled', undefined, 10],
        ['credits.low', 80, 2],
        ['credits.exhausted', undefined, 0],
      ]);
    } finally {
      await hook.close();
    }
  });
});
