import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it, vi } from 'vitest';
import { MemoryCustomerStore } from '../../../src/customers/memory-customer-store.js';
import { MemoryKeyStore } from '../../../src/keys/memory-key-store.js';
import { expectError } from '../../support/admin.js';
import { ADMIN_TOKEN, bearer, type TestGateway, useGateways } from '../../support/helpers.js';

/*
 * GET /admin/customers/:id/invoice-preview and GET /admin/keys/:id/invoice-preview (a key without
 * a customer): a billing period under the plan's price. Its units are the usage history's for the
 * period (the customer's, or the lone key's over the UTC month), after real traffic through the
 * gate (on two replicas on Redis, and embedded); its credits the ledger's spend in it.
 */

const gateways = useGateways();
const admin = bearer(ADMIN_TOKEN);
const PRICE = { currency: 'EUR', base: 4900, includedUnits: 10, unitPrice: 50, per: 4 };
/** A unit price alone: 2 cents a unit, nothing included. */
const CENTS = { currency: 'EUR', base: 0, includedUnits: 0, unitPrice: 2, per: 1 };

function plansFile(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'invoice-')), 'plans.json');
  const plans = {
    plans: {
      metered: { windows: { minute: 1000 }, price: PRICE },
      cents: { windows: { minute: 1000 }, price: CENTS },
      unpriced: { windows: { minute: 1000 } },
      // 2^52 minor units a period and a unit: one unit takes the total to 2^53, past what JSON carries exactly.
      dear: {
        windows: { minute: 1000 },
        price: { currency: 'JPY', base: 2 ** 52, includedUnits: 0, unitPrice: 2 ** 52, per: 1 },
      },
    },
    routeCosts: { 'POST /v1/pets': 5 },
  };
  writeFileSync(path, JSON.stringify(plans));
  return path;
}

const call = (gw: TestGateway, method: string, url: string, payload?: object, headers = {}) =>
  gw.admin.inject({ method: method as 'GET', url, headers: { ...admin, ...headers }, ...(payload ? { payload } : {}) });

async function replicas(redis: boolean, now: () => number): Promise<TestGateway[]> {
  const env = { PLANS_FILE: plansFile() };
  if (!redis) return [await gateways.start({ redisUrl: null, env, now })];
  const shared = { keyStore: new MemoryKeyStore(), customerStore: new MemoryCustomerStore() };
  const prefix = `inv${Date.now()}${Math.random().toString(36).slice(2, 6)}:`;
  return [await gateways.start({ prefix, env, now, ...shared }), await gateways.start({ prefix, env, now, ...shared })];
}

async function customerWithKey(gw: TestGateway, plan: string, credits?: object) {
  const customer = await call(gw, 'POST', '/admin/customers', { name: 'Acme', plan, ...(credits ? { credits } : {}) });
  expect(customer.statusCode, customer.body).toBe(201);
  const id = String(customer.json().id);
  const key = await call(gw, 'POST', '/admin/keys', { customerId: id, name: 'prod' });
  expect(key.statusCode, key.body).toBe(201);
  return { id, key: String(key.json().key), keyId: String(key.json().id) };
}

/** A key standing for itself on `plan`, with credit terms of its own when `credits` is given. */
async function loneKey(gw: TestGateway, plan: string, credits?: object) {
  const key = await call(gw, 'POST', '/admin/keys', { plan, name: 'solo' });
  expect(key.statusCode, key.body).toBe(201);
  const id = String(key.json().id);
  if (credits) expect((await call(gw, 'PATCH', `/admin/keys/${id}`, { credits })).statusCode).toBe(200);
  return { id, key: String(key.json().key) };
}

function traffic(gw: TestGateway, key: string, gets: number, posts: number): Promise<LightMyRequestResponse[]> {
  const get = () => gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
  const post = () =>
    gw.app.inject({
      method: 'POST',
      url: '/v1/pets',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      payload: { name: 'Rex', categoryId: 1 },
    });
  return Promise.all([...Array.from({ length: gets }, get), ...Array.from({ length: posts }, post)]);
}

async function json(res: Promise<LightMyRequestResponse>) {
  const answer = await res;
  expect(answer.statusCode, answer.body).toBe(200);
  return answer.json();
}

describe.each([
  ['two replicas on Redis', true],
  ['the embedded mode', false],
])('an invoice preview (%s)', (_label, redis) => {
  it('bills the units the history gives for the period, after traffic through the gate, and the credits it spent', async () => {
    const clock = Date.now();
    const [a, b = a] = await replicas(redis, () => clock);
    const { id, key } = await customerWithKey(a as TestGateway, 'metered', {});
    await spendSeventeen(a as TestGateway, b as TestGateway, `/admin/customers/${id}`, key);
    const history = await json(
      call(b as TestGateway, 'GET', `/admin/customers/${id}/usage/history?period=current&granularity=period`),
    );
    const preview = await json(call(b as TestGateway, 'GET', `/admin/customers/${id}/invoice-preview?period=current`));
    expect(history.totals.units).toBe(17);
    expect(preview).toMatchObject({ id, plan: 'metered', period: 'current', from: history.from, to: history.to });
    expect(preview.units).toBe(history.totals.units);
    expect(preview.creditsUsed).toBe(17);
    expect(preview.currency).toBe('EUR');
    expectSeventeenUnits(preview);
  });
});

describe('an invoice preview', () => {
  it('bills the previous period from the history and the ledger’s closed hours, as JSON and CSV', async () => {
    let clock = Date.parse('2026-03-10T12:00:00Z');
    const [gw] = (await replicas(false, () => clock)) as [TestGateway];
    const { id, key } = await customerWithKey(gw, 'metered', {});
    expect((await call(gw, 'POST', `/admin/customers/${id}/credits`, { amount: 50, reason: 'o' })).statusCode).toBe(
      201,
    );
    await traffic(gw, key, 3, 0);
    clock += 3 * 3_600_000;
    await traffic(gw, key, 0, 2);
    // Into April (the default anchor is the 1st, UTC): March is now the previous period.
    clock = Date.parse('2026-04-02T00:30:00Z');
    await traffic(gw, key, 1, 0);
    const history = await json(
      call(gw, 'GET', `/admin/customers/${id}/usage/history?period=previous&granularity=period`),
    );
    await expectMarchThenApril(gw, `/admin/customers/${id}`, id, history);
  });

  // The previous period starts up to 62 days back (two 31-day months): the default
  // USAGE_HISTORY_DAYS holds it whole on every day of the current one, the middle and the last hour.
  it.each([
    ['the middle of the month', '2026-08-15T12:00:00Z'],
    ['the last hour of a 31-day month after another', '2026-08-31T23:30:00Z'],
  ])('previews the previous period in %s with the default history retention', async (_label, at) => {
    let clock = Date.parse('2026-07-01T00:20:00Z');
    const [gw] = (await replicas(false, () => clock)) as [TestGateway];
    const { id, key } = await customerWithKey(gw, 'metered', {});
    expect((await call(gw, 'POST', `/admin/customers/${id}/credits`, { amount: 50, reason: 'o' })).statusCode).toBe(
      201,
    );
    // The period's first hour and its last day.
    await traffic(gw, key, 2, 0);
    clock = Date.parse('2026-07-31T22:00:00Z');
    await traffic(gw, key, 1, 1);
    clock = Date.parse(at);
    const previous = await json(call(gw, 'GET', `/admin/customers/${id}/invoice-preview?period=previous`));
    expect(previous).toMatchObject({ from: '2026-07-01T00:00:00.000Z', to: '2026-08-01T00:00:00.000Z' });
    expect([previous.units, previous.creditsUsed]).toEqual([8, 8]);
  });

  it('asks for the admin token, answers 404 for an unknown customer, 400 for a period out of shape, 409 for a plan without a price', async () => {
    const [gw] = (await replicas(false, () => Date.parse('2026-03-10T12:00:00Z'))) as [TestGateway];
    expectError(await call(gw, 'GET', '/admin/customers/cus_nobody/invoice-preview'), 404, 'not_found');
    const anonymous = await gw.admin.inject({ url: '/admin/customers/cus_nobody/invoice-preview' });
    expect(anonymous.statusCode).toBe(401);
    const { id } = await customerWithKey(gw, 'metered');
    expectError(await call(gw, 'GET', `/admin/customers/${id}/invoice-preview?period=next`), 400, 'invalid_request');
    expectError(
      await call(gw, 'GET', `/admin/customers/${id}/invoice-preview?from=2026-03-01`),
      400,
      'invalid_request',
    );
    const unpriced = await customerWithKey(gw, 'unpriced');
    const conflict = await call(gw, 'GET', `/admin/customers/${unpriced.id}/invoice-preview`);
    expectError(conflict, 409, 'conflict');
    expect(conflict.json().message).toMatch(/plan unpriced has no price.*plans\.unpriced\.price/);
  });
});

describe.each([
  ['two replicas on Redis', true],
  ['the embedded mode', false],
])('a lone key’s invoice preview (%s)', (_label, redis) => {
  it('bills the units the key’s history gives for the UTC month, after traffic through the gate, and the credits it spent', async () => {
    const clock = Date.now();
    const [a, b = a] = await replicas(redis, () => clock);
    const { id, key } = await loneKey(a as TestGateway, 'metered', {});
    await spendSeventeen(a as TestGateway, b as TestGateway, `/admin/keys/${id}`, key);
    const history = await json(call(b as TestGateway, 'GET', `/admin/keys/${id}/usage/history?period=current`));
    const preview = await json(call(b as TestGateway, 'GET', `/admin/keys/${id}/invoice-preview?period=current`));
    const today = new Date(clock);
    const monthStart = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), 1)).toISOString();
    const nextMonth = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth() + 1, 1)).toISOString();
    expect(history.totals.units).toBe(17);
    expect(history.from).toBe(monthStart);
    expect(preview).toMatchObject({ id, name: 'solo', plan: 'metered', period: 'current', from: monthStart });
    expect(preview.to).toBe(nextMonth);
    expect(preview.units).toBe(history.totals.units);
    expect(preview.creditsUsed).toBe(17);
    expect(preview.currency).toBe('EUR');
    expectSeventeenUnits(preview);
  });

  it('bills a key for the hours it stood for itself, and its customer for the hours it belonged to it: none twice', async () => {
    const clock = Date.now();
    const [a, b = a] = await replicas(redis, () => clock);
    const { id, key } = await loneKey(a as TestGateway, 'metered');
    const customer = await customerWithKey(a as TestGateway, 'metered');
    const move = async (customerId: string | null) =>
      expect((await call(a as TestGateway, 'PATCH', `/admin/keys/${id}`, { customerId })).statusCode).toBe(200);
    const served = async (gw: TestGateway, gets: number) =>
      expect((await traffic(gw, key, gets, 0)).map((r) => r.statusCode)).toEqual(Array(gets).fill(200));
    await served(a as TestGateway, 2);
    await move(customer.id);
    await served(b as TestGateway, 3);
    expectError(await call(b as TestGateway, 'GET', `/admin/keys/${id}/invoice-preview`), 409, 'conflict');
    await move(null);
    await served(b as TestGateway, 1);
    const own = await json(call(b as TestGateway, 'GET', `/admin/keys/${id}/invoice-preview`));
    const history = await json(call(b as TestGateway, 'GET', `/admin/keys/${id}/usage/history?period=current`));
    const customers = await json(call(a as TestGateway, 'GET', `/admin/customers/${customer.id}/invoice-preview`));
    expect([own.units, history.totals.units, customers.units]).toEqual([3, 3, 3]);
  });
});

describe.each([
  ['a customer', customerWithKey, 'customers'],
  ['a lone key', loneKey, 'keys'],
] as const)('the invoice preview of %s paying with credits', (_label, make, route) => {
  const rows = (csv: string) => csv.split('\r\n').slice(1, -1);

  // A unit served by spending a credit was paid when the credit was bought: never overage too.
  it('bills no unit price for the units its credits paid, in JSON and in CSV', async () => {
    const [gw] = (await replicas(false, () => Date.parse('2026-03-10T12:00:00Z'))) as [TestGateway];
    const { id, key } = await make(gw, 'cents', {});
    expect((await call(gw, 'POST', `/admin/${route}/${id}/credits`, { amount: 100, reason: 'o' })).statusCode).toBe(
      201,
    );
    expect((await traffic(gw, key, 55, 0)).map((r) => r.statusCode)).toEqual(Array(55).fill(200));
    const preview = await json(call(gw, 'GET', `/admin/${route}/${id}/invoice-preview`));
    expect([preview.units, preview.creditsUsed, preview.total]).toEqual([55, 55, 0]);
    expect(preview.lines.find((l: { line: string }) => l.line === 'overage')).toMatchObject({
      quantity: 0,
      billedUnits: 0,
      amount: 0,
    });
    const csv = await call(gw, 'GET', `/admin/${route}/${id}/invoice-preview?format=csv`);
    expect(rows(csv.body)).toEqual([
      'base,Base fee for the billing period,1,,,,0,EUR',
      'included,Units included (0),0,,,,0,EUR',
      'overage,"Units beyond those included, 2 per 1 started",0,0,2,1,0,EUR',
      'credits,Prepaid credits spent,55,,,,0,EUR',
      'total,Total,,,,,0,EUR',
    ]);
  });

  it('bills the unit price for the units served before it spent credits, and only those', async () => {
    const [gw] = (await replicas(false, () => Date.parse('2026-03-10T12:00:00Z'))) as [TestGateway];
    const { id, key } = await make(gw, 'cents');
    expect((await traffic(gw, key, 5, 0)).map((r) => r.statusCode)).toEqual(Array(5).fill(200));
    const owner = `/admin/${route}/${id}`;
    expect((await call(gw, 'PATCH', owner, { credits: {} })).statusCode).toBe(200);
    expect((await call(gw, 'POST', `${owner}/credits`, { amount: 100, reason: 'o' })).statusCode).toBe(201);
    expect((await traffic(gw, key, 50, 0)).map((r) => r.statusCode)).toEqual(Array(50).fill(200));
    const preview = await json(call(gw, 'GET', `${owner}/invoice-preview`));
    expect([preview.units, preview.creditsUsed, preview.total]).toEqual([55, 50, 10]);
    const csv = await call(gw, 'GET', `${owner}/invoice-preview`, undefined, { accept: 'text/csv' });
    expect(rows(csv.body).slice(2)).toEqual([
      'overage,"Units beyond those included, 2 per 1 started",5,5,2,1,10,EUR',
      'credits,Prepaid credits spent,50,,,,0,EUR',
      'total,Total,,,,,10,EUR',
    ]);
  });
});

describe.each([
  ['a customer', customerWithKey, 'customers'],
  ['a lone key', loneKey, 'keys'],
] as const)('the invoice preview of %s without credit terms', (_label, make, route) => {
  it('has no credits line', async () => {
    const [gw] = (await replicas(false, () => Date.parse('2026-03-10T12:00:00Z'))) as [TestGateway];
    const { id, key } = await make(gw, 'metered');
    await traffic(gw, key, 2, 0);
    const preview = await json(call(gw, 'GET', `/admin/${route}/${id}/invoice-preview`));
    expect(preview.creditsUsed).toBeNull();
    expect(preview.lines.map((l: { line: string }) => l.line)).toEqual(['base', 'included', 'overage']);
    expect([preview.units, preview.total]).toEqual([2, 4900]);
  });
});

describe('a lone key’s invoice preview', () => {
  it('bills the previous UTC month from the key’s history and its ledger’s closed hours, as JSON and CSV', async () => {
    let clock = Date.parse('2026-03-10T12:00:00Z');
    const [gw] = (await replicas(false, () => clock)) as [TestGateway];
    const { id, key } = await loneKey(gw, 'metered', {});
    expect((await call(gw, 'POST', `/admin/keys/${id}/credits`, { amount: 50, reason: 'o' })).statusCode).toBe(201);
    // March's first hour and its last: both in the month, none of it in April.
    clock = Date.parse('2026-03-01T00:10:00Z');
    await traffic(gw, key, 3, 0);
    clock = Date.parse('2026-03-31T23:50:00Z');
    await traffic(gw, key, 0, 2);
    clock = Date.parse('2026-04-01T00:00:00Z');
    await traffic(gw, key, 1, 0);
    clock = Date.parse('2026-04-02T00:30:00Z');
    const history = await json(call(gw, 'GET', `/admin/keys/${id}/usage/history?period=previous&granularity=day`));
    expect(history.from).toBe('2026-03-01T00:00:00.000Z');
    await expectMarchThenApril(gw, `/admin/keys/${id}`, id, history);
  });

  it('asks for the admin token, answers 404 for an unknown key, 400 for a period out of shape, 409 for a customer’s key (naming its customer’s preview) and for a plan without a price', async () => {
    const [gw] = (await replicas(false, () => Date.parse('2026-03-10T12:00:00Z'))) as [TestGateway];
    expectError(await call(gw, 'GET', '/admin/keys/key_nobody/invoice-preview'), 404, 'not_found');
    const anonymous = await gw.admin.inject({ url: '/admin/keys/key_nobody/invoice-preview' });
    expect(anonymous.statusCode).toBe(401);
    const { id } = await loneKey(gw, 'metered');
    expectError(await call(gw, 'GET', `/admin/keys/${id}/invoice-preview?period=next`), 400, 'invalid_request');
    expectError(await call(gw, 'GET', `/admin/keys/${id}/invoice-preview?from=2026-03-01`), 400, 'invalid_request');
    // A key of a customer on a priced plan: the customer is billed, the key is not.
    const customer = await customerWithKey(gw, 'metered');
    const customerKey = customer.keyId;
    await json(call(gw, 'GET', `/admin/customers/${customer.id}/invoice-preview`));
    const owned = await call(gw, 'GET', `/admin/keys/${customerKey}/invoice-preview`);
    expectError(owned, 409, 'conflict');
    expect(owned.json().message).toBe(
      `Key ${customerKey} belongs to customer ${customer.id} and is billed as the customer: see /admin/customers/${customer.id}/invoice-preview`,
    );
    const unpriced = await loneKey(gw, 'unpriced');
    const conflict = await call(gw, 'GET', `/admin/keys/${unpriced.id}/invoice-preview`);
    expectError(conflict, 409, 'conflict');
    expect(conflict.json().message).toBe(
      `Key ${unpriced.id}'s plan unpriced has no price: give it one in PLANS_FILE (plans.unpriced.price)`,
    );
  });
});

/**
 * March (13 units, all paid by credits, so none included nor overage: the 4900 base alone) as the
 * previous period, and April's first unit as the current one, for a customer or a lone key at
 * `path`: JSON, and the same as CSV by Accept and by format; the units equal `history`'s totals.
 */
async function expectMarchThenApril(gw: TestGateway, path: string, id: string, history: { totals: { units: number } }) {
  const previous = await json(call(gw, 'GET', `${path}/invoice-preview?period=previous`));
  expect(previous).toMatchObject({ from: '2026-03-01T00:00:00.000Z', to: '2026-04-01T00:00:00.000Z' });
  expect([previous.units, history.totals.units]).toEqual([13, 13]);
  expect(previous.creditsUsed).toBe(13);
  expect(previous.total).toBe(4900);
  const current = await json(call(gw, 'GET', `${path}/invoice-preview`));
  expect([current.period, current.units, current.creditsUsed, current.total]).toEqual(['current', 1, 1, 4900]);
  const csv = await call(gw, 'GET', `${path}/invoice-preview?period=previous`, undefined, { accept: 'text/csv' });
  expect(csv.statusCode).toBe(200);
  expect(csv.headers['content-type']).toBe('text/csv; charset=utf-8');
  expect(csv.headers['content-disposition']).toBe(`attachment; filename="invoice-${id}-2026-03-01.csv"`);
  expect(csv.body.split('\r\n')).toEqual([
    'line,description,quantity,billed_units,unit_price,per,amount,currency',
    'base,Base fee for the billing period,1,,,,4900,EUR',
    'included,Units included (10),0,,,,0,EUR',
    'overage,"Units beyond those included, 50 per 4 started",0,0,50,4,0,EUR',
    'credits,Prepaid credits spent,13,,,,0,EUR',
    'total,Total,,,,,4900,EUR',
    '',
  ]);
  const formatCsv = await call(gw, 'GET', `${path}/invoice-preview?period=previous&format=csv`);
  expect(formatCsv.body).toBe(csv.body);
}

/**
 * 100 credits to `owner` (a customer's or a lone key's admin path), then 7 GETs of 1 and 2 POSTs
 * of 5 with `key` across both replicas: 17 units, past the 10 included, all admitted and paid by credits.
 */
async function spendSeventeen(a: TestGateway, b: TestGateway, owner: string, key: string): Promise<void> {
  expect((await call(a, 'POST', `${owner}/credits`, { amount: 100, reason: 'o' })).statusCode).toBe(201);
  const sent = [...(await traffic(a, key, 4, 1)), ...(await traffic(b, key, 3, 1))];
  expect(sent.map((r) => r.statusCode)).toEqual(Array(9).fill(200));
}

/** The lines and total of spendSeventeen's period: 17 credits paid for all 17 units, so the base alone. */
function expectSeventeenUnits(preview: { lines: unknown; total: unknown }): void {
  expect(preview.lines).toEqual([
    { line: 'base', description: expect.any(String), quantity: 1, amount: 4900 },
    { line: 'included', description: expect.any(String), quantity: 0, amount: 0 },
    {
      line: 'overage',
      description: expect.any(String),
      quantity: 0,
      billedUnits: 0,
      unitPrice: 50,
      per: 4,
      amount: 0,
    },
    { line: 'credits', description: expect.any(String), quantity: 17, amount: 0 },
  ]);
  expect(preview.total).toBe(4900);
}

describe('an invoice preview at the edges', () => {
  // Tokyo is UTC+9 all year: a period from the 15th starts at 15:00 UTC on the 14th.
  it('bills a customer anchored on the 15th in its zone by its own period: a unit a second before it starts is the previous one’s', async () => {
    let clock = Date.parse('2026-03-14T14:59:59.000Z');
    const [gw] = (await replicas(false, () => clock)) as [TestGateway];
    const made = await call(gw, 'POST', '/admin/customers', {
      name: 'Tokyo',
      plan: 'cents',
      billing: { anchorDay: 15, timeZone: 'Asia/Tokyo' },
    });
    expect(made.statusCode, made.body).toBe(201);
    const id = String(made.json().id);
    const key = String((await call(gw, 'POST', '/admin/keys', { customerId: id })).json().key);
    await traffic(gw, key, 1, 0);
    clock = Date.parse('2026-03-14T15:00:00.000Z');
    await traffic(gw, key, 2, 0);
    clock = Date.parse('2026-03-20T12:00:00.000Z');
    const current = await json(call(gw, 'GET', `/admin/customers/${id}/invoice-preview`));
    expect(current).toMatchObject({
      from: '2026-03-14T15:00:00.000Z',
      to: '2026-04-14T15:00:00.000Z',
      units: 2,
      total: 4,
    });
    const previous = await json(call(gw, 'GET', `/admin/customers/${id}/invoice-preview?period=previous`));
    expect(previous).toMatchObject({
      from: '2026-02-14T15:00:00.000Z',
      to: '2026-03-14T15:00:00.000Z',
      units: 1,
      total: 2,
    });
  });

  it('answers 409 once one unit takes the total past what a JSON number carries exactly, naming the amount', async () => {
    const [gw] = (await replicas(false, () => Date.parse('2026-03-10T12:00:00Z'))) as [TestGateway];
    const { id, key } = await customerWithKey(gw, 'dear');
    // No unit yet: the base alone, 2^52, is exact.
    expect(await json(call(gw, 'GET', `/admin/customers/${id}/invoice-preview`))).toMatchObject({ total: 2 ** 52 });
    await traffic(gw, key, 1, 0);
    const refused = await call(gw, 'GET', `/admin/customers/${id}/invoice-preview`);
    expectError(refused, 409, 'conflict');
    expect(refused.json().message).toBe(
      'the total is 9007199254740992 minor units, beyond 2^53 − 1: it cannot be shown exactly',
    );
  });
});

describe('the invoice preview without its usage history', () => {
  it('answers 503 for a customer and a lone key when the history cannot be read', async () => {
    const [gw] = await replicas(false, Date.now);
    if (!gw) throw new Error('no gateway');
    const customer = await customerWithKey(gw, 'metered');
    const lone = await loneKey(gw, 'metered');
    vi.spyOn(gw.deps.history, 'hours').mockRejectedValue(new Error('history away'));
    for (const url of [`/admin/customers/${customer.id}/invoice-preview`, `/admin/keys/${lone.id}/invoice-preview`]) {
      expectError(await call(gw, 'GET', url), 503, 'rate_limiter_unavailable');
    }
  });
});

describe('the invoice preview’s reference', () => {
  it('documents the preview and its errors for customers and lone keys in GET /admin/openapi.json', async () => {
    const gw = await gateways.start({ redisUrl: null });
    const res = await gw.admin.inject({ method: 'GET', url: '/admin/openapi.json', headers: admin });
    expect(res.statusCode, res.body).toBe(200);
    for (const path of ['/admin/customers/{id}/invoice-preview', '/admin/keys/{id}/invoice-preview']) {
      const { responses } = res.json().paths[path].get;
      const preview = responses['200'].content['application/json'].schema;
      expect(preview.required, path).toEqual(expect.arrayContaining(['id', 'period', 'from', 'to', 'units']));
      expect(responses['409'].content['application/json'].schema, path).toEqual({ $ref: '#/components/schemas/Error' });
    }
  });
});
