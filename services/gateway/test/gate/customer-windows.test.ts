import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { MemoryCustomerStore } from '../../src/customers/memory-customer-store.js';
import { createKey } from '../../src/keys/create-key.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import { ADMIN_TOKEN, bearer, type TestGateway, useGateways } from '../support/helpers.js';

/**
 * Keys of a customer at the gate: the customer's windows shared by its keys across replicas,
 * named `customer-…` in the RateLimit fields and in the 429, the key's own windows beside them;
 * a change to the customer applies on every replica. The limiter's own rules for them are in the
 * limiter contract (customer-windows.contract.ts).
 */
const gateways = useGateways();
const admin = bearer(ADMIN_TOKEN);

/** Two replicas of one deployment: one Redis, one prefix, one key and customer store. */
async function replicas(env: Record<string, string> = {}): Promise<[TestGateway, TestGateway]> {
  const keyStore = new MemoryKeyStore();
  const customerStore = new MemoryCustomerStore();
  const prefix = `c${Date.now()}${Math.random().toString(36).slice(2, 6)}:`;
  const make = () => gateways.start({ prefix, env, keyStore, customerStore });
  return [await make(), await make()];
}

async function call(gw: TestGateway, method: string, url: string, payload?: object): Promise<LightMyRequestResponse> {
  return gw.admin.inject({ method: method as 'GET', url, headers: admin, ...(payload ? { payload } : {}) });
}

async function made(res: LightMyRequestResponse): Promise<Record<string, unknown>> {
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

/** A customer and `n` keys of it, the first with the own limits given. */
async function customerWithKeys(gw: TestGateway, body: object, n: number, ownLimits?: object) {
  const customer = await made(await call(gw, 'POST', '/admin/customers', { name: 'Acme', ...body }));
  const keys: string[] = [];
  const keyIds: string[] = [];
  for (let i = 0; i < n; i++) {
    const key = await made(
      await call(gw, 'POST', '/admin/keys', {
        customerId: customer.id,
        name: `k${i}`,
        ...(i === 0 && ownLimits ? { limits: ownLimits } : {}),
      }),
    );
    keys.push(String(key.key));
    keyIds.push(String(key.id));
  }
  return { id: String(customer.id), keys, keyIds };
}

const get = (gw: TestGateway, key: string) => gw.app.inject({ url: '/v1/pets', headers: bearer(key) });

describe('the keys of a customer at the gate', () => {
  it('admit exactly the customer’s 300 a minute from 3 keys × 150 concurrent requests over two replicas', async () => {
    const [a, b] = await replicas({ BAN_THRESHOLD: '1000' });
    const { id, keys } = await customerWithKeys(a, { plan: 'pro' }, 3);
    const answers = await Promise.all(
      keys.flatMap((key) => Array.from({ length: 150 }, (_, i) => get(i % 2 ? a : b, key))),
    );
    expect(answers.filter((r) => r.statusCode === 200)).toHaveLength(300);
    expect(answers.filter((r) => r.statusCode === 429)).toHaveLength(150);
    const usage = (await call(b, 'GET', `/admin/customers/${id}/usage`)).json();
    expect(usage.windows).toMatchObject({ minute: { limit: 300, used: 300, remaining: 0 }, day: { used: 300 } });
  });

  it('admit exactly the customer’s limit in the embedded mode too (no Redis: one process)', async () => {
    const gw = await gateways.start({ redisUrl: null, env: { BAN_THRESHOLD: '1000' } });
    const { id, keys } = await customerWithKeys(gw, { plan: 'free', limits: { perMinute: 40 } }, 3, { perMinute: 20 });
    const answers = await Promise.all(keys.flatMap((key) => Array.from({ length: 30 }, () => get(gw, key))));
    expect(answers.filter((r) => r.statusCode === 200)).toHaveLength(40);
    const usage = (await call(gw, 'GET', `/admin/customers/${id}/usage`)).json();
    expect(usage.windows.minute).toMatchObject({ limit: 40, used: 40, remaining: 0 });
  });

  it.each([
    [
      'no limits of its own: the customer’s windows alone, the binding one in X-RateLimit-*',
      undefined,
      { 'ratelimit-policy': '"customer-minute";q=2;w=60, "customer-day";q=1000;w=86400', 'x-ratelimit-limit': '2' },
      /^"customer-minute";r=1;t=\d+, "customer-day";r=999;t=\d+$/,
    ],
    [
      'limits of its own: its windows beside the customer’s, shortest first',
      { perMinute: 1 },
      {
        'ratelimit-policy': '"minute";q=1;w=60, "customer-minute";q=2;w=60, "customer-day";q=1000;w=86400',
        'x-ratelimit-limit': '1',
      },
      /^"minute";r=0;t=\d+, "customer-minute";r=1;t=\d+, "customer-day";r=999;t=\d+$/,
    ],
  ])('report the customer’s windows as customer-…: %s', async (_label, own, headers, state) => {
    const [gw] = await replicas();
    const { keys } = await customerWithKeys(gw, { plan: 'free', limits: { perMinute: 2 } }, 1, own);
    const res = await get(gw, keys[0] as string);
    expect(res.statusCode).toBe(200);
    expect(res.headers).toMatchObject(headers);
    expect(res.headers.ratelimit).toMatch(state);
  });

  it('say in the 429 that the customer’s shared quota is spent, and which key’s own window refused otherwise', async () => {
    const [a, b] = await replicas({ BAN_THRESHOLD: '1000' });
    const { id, keys, keyIds } = await customerWithKeys(a, { plan: 'free', limits: { perMinute: 2 } }, 2, {
      perMinute: 1,
    });
    const [own, sibling] = keys as [string, string];
    expect((await get(a, own)).statusCode).toBe(200);
    const byOwn = await get(b, own);
    expect(byOwn.statusCode).toBe(429);
    expect(byOwn.json().message).toMatch(
      /^Rate limit exceeded for the free plan: the minute window \(1 per minute\) is used up/,
    );
    expect((await get(b, sibling)).statusCode).toBe(200);
    const byCustomer = await get(a, sibling);
    expect(byCustomer.statusCode).toBe(429);
    expect(byCustomer.json()).toMatchObject({ code: 'rate_limit_exceeded', status: 429 });
    expect(byCustomer.json().message).toContain(
      `customer ${id}'s shared quota, "customer-minute": minute window (2 per minute), shared by all its keys, is used up`,
    );
    expect(byCustomer.headers['x-ratelimit-remaining']).toBe('0');
    expect(Number(byCustomer.headers['retry-after'])).toBeGreaterThan(0);
    // The key's live usage: its own windows, and the customer's it shares.
    const usage = (await call(b, 'GET', `/admin/keys/${keyIds[0]}/usage`)).json();
    expect(usage.windows).toEqual({ minute: expect.objectContaining({ limit: 1, used: 1, remaining: 0 }) });
    expect(usage.customer).toMatchObject({
      id,
      windows: { minute: { limit: 2, used: 2, remaining: 0 }, day: { limit: 1_000, used: 2 } },
    });
    expect(usage.refusals).toBe(1);
  });

  it('name the customer’s billing day in a refusal and reset its day at local midnight', async () => {
    const [gw] = await replicas({ BAN_THRESHOLD: '1000' });
    const { keys } = await customerWithKeys(
      gw,
      { plan: 'free', limits: { perMinute: 2, perDay: 2 }, billing: { anchorDay: 15, timeZone: 'Pacific/Kiritimati' } },
      1,
    );
    const key = keys[0] as string;
    // Kiritimati is UTC+14 all year: its day ends at 10:00 UTC.
    const now = Date.now();
    const endOfDay = Math.floor((now + 14 * 3_600_000) / 86_400_000 + 1) * 86_400_000 - 14 * 3_600_000;
    const first = await get(gw, key);
    const t = Number(/"customer-day";r=1;t=(\d+)$/.exec(String(first.headers.ratelimit))?.[1]);
    expect(Math.abs(now + t * 1000 - endOfDay)).toBeLessThan(2_000);
    await get(gw, key);
    const refused = await get(gw, key);
    expect(refused.statusCode).toBe(429);
    expect(refused.json().message).toContain('"customer-day": day quota (2 per day in Pacific/Kiritimati)');
    expect(refused.json().message).toContain(`it resets on ${new Date(endOfDay).toISOString()}`);
  });

  it('serve a key whose customer is gone (its revocation racing the request) on its own plan, not unlimited', async () => {
    const [gw] = await replicas();
    const { key, record } = createKey({ plan: 'free', name: 'orphan' });
    await gw.deps.keyStore.insert({ ...record, customerId: 'cus_0000000000000000' });
    const res = await get(gw, key);
    expect(res.statusCode).toBe(200);
    expect(res.headers['ratelimit-policy']).toBe('"minute";q=60;w=60, "day";q=1000;w=86400');
  });

  it('apply a change to the customer on every replica: its new limits, from the next request', async () => {
    const [a, b] = await replicas();
    const { id, keys } = await customerWithKeys(a, { plan: 'free' }, 1);
    const key = keys[0] as string;
    expect((await get(b, key)).headers['ratelimit-policy']).toBe(
      '"customer-minute";q=60;w=60, "customer-day";q=1000;w=86400',
    );
    expect((await call(a, 'PATCH', `/admin/customers/${id}`, { limits: { perMinute: 5 } })).statusCode).toBe(200);
    await expect
      .poll(async () => (await get(b, key)).headers['ratelimit-policy'])
      .toBe('"customer-minute";q=5;w=60, "customer-day";q=1000;w=86400');
  });
});

describe('the usage history of a customer’s keys', () => {
  // India's hours run from :30 past the UTC hour: the failure is taken out of the hour of its admission.
  it.each([
    ['UTC', 0],
    ['Asia/Kolkata', 30],
  ])(
    'counts each request in the key’s hours and the customer’s, a request the upstream did not serve in neither’s bill (%s)',
    async (timeZone, shiftMinutes) => {
      const keyStore = new MemoryKeyStore();
      const customerStore = new MemoryCustomerStore();
      const gw = await gateways.start({ keyStore, customerStore, upstream: 'http://127.0.0.1:9' });
      const { id, keys, keyIds } = await customerWithKeys(gw, { plan: 'free', billing: { anchorDay: 1, timeZone } }, 2);
      // Nothing listens there: 502 or 503, unserved either way.
      for (const key of keys) expect([502, 503]).toContain((await get(gw, key)).statusCode);
      await gw.deps.history.flush();
      const shift = shiftMinutes * 60_000;
      const hour = Date.now() - ((Date.now() - shift) % 3_600_000);
      const [customerHour] = await gw.deps.history.hours(id, hour, hour + 3_600_000);
      expect(customerHour).toMatchObject({ admitted: 0, units: 0, upstreamFailed: 2 });
      const [keyHour] = await gw.deps.history.hours(keyIds[0] as string, hour, hour + 3_600_000, id);
      expect(keyHour).toMatchObject({ admitted: 0, units: 0, upstreamFailed: 1 });
    },
  );
});

describe('GET /admin/customers/:id/usage', () => {
  it.each([
    ['a customer that does not exist', 'cus_0000000000000000', 404, 'not_found'],
    ['garbage', 'nope', 404, 'not_found'],
    ['an operator-shaped id', '%7B%22%24gt%22%3A%22%22%7D', 404, 'not_found'],
    ['a key id', 'key_0000000000000000', 404, 'not_found'],
    ['an id past 64 characters', `cus_${'a'.repeat(61)}`, 400, 'invalid_request'],
  ])('answers %s with %i', async (_what, id, status, code) => {
    const [gw] = await replicas();
    const res = await call(gw, 'GET', `/admin/customers/${id}/usage`);
    expect(res.statusCode, res.body).toBe(status);
    expect(res.json()).toEqual({ code, message: expect.any(String), status });
  });

  it('asks for the admin token like every admin route', async () => {
    const [gw] = await replicas();
    const res = await gw.admin.inject({ url: '/admin/customers/cus_0000000000000000/usage' });
    expect(res.statusCode).toBe(401);
  });

  it('answers a customer’s shared windows, nothing used before its first request, its month from its anchor', async () => {
    const [gw] = await replicas();
    const { id } = await customerWithKeys(gw, { plan: 'pro', limits: { perMonth: 50_000 } }, 0);
    const res = await call(gw, 'GET', `/admin/customers/${id}/usage`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      id,
      plan: 'pro',
      limits: { perMinute: 300, perDay: 10_000, perMonth: 50_000 },
      billing: { anchorDay: 1, timeZone: 'UTC' },
      windows: {
        minute: { limit: 300, used: 0, remaining: 300, resetAt: null },
        day: { limit: 10_000, used: 0, remaining: 10_000, resetAt: null },
        month: { limit: 50_000, used: 0, remaining: 50_000, resetAt: null },
      },
    });
  });
});
