import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey, hashApiKey } from '../../src/keys/api-key.js';
import { ADMIN_TOKEN, bearer, startEchoUpstream, startGateway, type TestGateway } from '../support/helpers.js';

type Upstream = Awaited<ReturnType<typeof startEchoUpstream>>;

const auth = bearer(ADMIN_TOKEN);

const PLAN_TABLE = {
  free: { perMinute: 60, perDay: 1_000 },
  pro: { perMinute: 300, perDay: 10_000 },
  business: { perMinute: 1_000, perDay: 100_000 },
} as const;

interface Created {
  id: string;
  key: string;
  plan: string;
  name: string;
  limits: { perMinute: number; perDay: number };
  createdAt: string;
}

/** The Error shape: exactly code, message and status, status equal to the HTTP status, JSON. */
function expectError(res: LightMyRequestResponse, status: number, code: string): void {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const body = res.json();
  expect(Object.keys(body).sort()).toEqual(['code', 'message', 'status']);
  expect(body.code).toBe(code);
  expect(body.status).toBe(status);
  expect(typeof body.message).toBe('string');
  expect(body.message.length).toBeGreaterThan(0);
}

async function createKey(gw: TestGateway, payload: unknown): Promise<Created> {
  const res = await gw.admin.inject({ method: 'POST', url: '/admin/keys', headers: auth, payload: payload as object });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

function pets(gw: TestGateway, key: string) {
  return gw.app.inject({ method: 'GET', url: '/v1/pets', headers: bearer(key) });
}

let upstream: Upstream;

beforeAll(async () => {
  upstream = await startEchoUpstream();
});

afterAll(async () => {
  await upstream?.close();
});

/**
 * A gateway of its own for the enclosing describe block, holding one free key: started before the
 * block's tests, closed after them.
 */
function gatewayWithOneKey(): { gw: TestGateway; existing: Created } {
  const own = {} as { gw: TestGateway; existing: Created };
  beforeAll(async () => {
    own.gw = await startGateway({ upstream: upstream.url });
    own.existing = await createKey(own.gw, { plan: 'free' });
  });
  afterAll(async () => {
    await own.gw?.close();
  });
  return own;
}

describe('POST /admin/keys', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startGateway({ upstream: upstream.url });
  });
  afterAll(async () => {
    await gw?.close();
  });

  for (const plan of ['free', 'pro', 'business'] as const) {
    it(`creates a ${plan} key with the plan's limits, and the key works on the public app`, async () => {
      const before = Date.now();
      const res = await gw.admin.inject({ method: 'POST', url: '/admin/keys', headers: auth, payload: { plan } });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      const body = res.json() as Created;
      expect(Object.keys(body).sort()).toEqual(['createdAt', 'id', 'key', 'limits', 'name', 'plan', 'scopes']);
      expect(body.plan).toBe(plan);
      expect(body.limits).toEqual(PLAN_TABLE[plan]);
      expect(body.key).toMatch(/^ask_[0-9A-Za-z]{46}$/);
      expect(body.id).toMatch(/^key_[0-9A-Za-z]+$/);
      expect(body.name).toBe(body.id);
      expect(new Date(body.createdAt).toISOString()).toBe(body.createdAt);
      expect(Date.parse(body.createdAt)).toBeGreaterThanOrEqual(before - 1000);

      const proxied = await pets(gw, body.key);
      expect(proxied.statusCode, proxied.body).toBe(200);
      expect(proxied.json()).toMatchObject({ method: 'GET', url: '/v1/pets' });
      expect(proxied.json().headers['x-api-key-id']).toBe(body.id);
      expect(proxied.json().headers['x-api-plan']).toBe(plan);
      expect(proxied.headers['x-ratelimit-limit']).toBe(String(PLAN_TABLE[plan].perMinute));
      expect(proxied.headers['x-ratelimit-remaining']).toBe(String(PLAN_TABLE[plan].perMinute - 1));
    });
  }

  it('creates an enterprise key with its own limits, which the public app enforces', async () => {
    const body = await createKey(gw, { plan: 'enterprise', name: 'Acme Corp', limits: { perMinute: 2, perDay: 50 } });
    expect(Object.keys(body).sort()).toEqual(['createdAt', 'id', 'key', 'limits', 'name', 'plan', 'scopes']);
    expect(body).toMatchObject({ plan: 'enterprise', name: 'Acme Corp', limits: { perMinute: 2, perDay: 50 } });
    const first = await pets(gw, body.key);
    expect(first.statusCode).toBe(200);
    expect(first.headers['x-ratelimit-limit']).toBe('2');
    expect((await pets(gw, body.key)).statusCode).toBe(200);
    expectError(await pets(gw, body.key), 429, 'rate_limit_exceeded');
  });

  it('keeps a given name', async () => {
    const body = await createKey(gw, { plan: 'pro', name: 'billing job' });
    expect(body.name).toBe('billing job');
  });

  it('creates a different key and id every time', async () => {
    const a = await createKey(gw, { plan: 'free' });
    const b = await createKey(gw, { plan: 'free' });
    expect(a.key).not.toBe(b.key);
    expect(a.id).not.toBe(b.id);
  });

  it('refuses an enterprise key without limits', async () => {
    const res = await gw.admin.inject({
      method: 'POST',
      url: '/admin/keys',
      headers: auth,
      payload: { plan: 'enterprise' },
    });
    expectError(res, 400, 'invalid_request');
    expect(res.json().message).toMatch(/limits/);
  });

  for (const plan of ['free', 'pro', 'business'] as const) {
    it(`lets a ${plan} key carry limits of its own over its plan's windows, which the public app enforces`, async () => {
      const body = await createKey(gw, { plan, limits: { perMinute: 2 } });
      expect(body.limits).toMatchObject({ perMinute: 2 });
      expect(body.limits.perDay).toBeGreaterThanOrEqual(1_000);
      expect((await pets(gw, body.key)).headers['x-ratelimit-limit']).toBe('2');
      expect((await pets(gw, body.key)).statusCode).toBe(200);
      expectError(await pets(gw, body.key), 429, 'rate_limit_exceeded');
    });
  }

  it('refuses a missing or unknown plan', async () => {
    for (const payload of [{}, { plan: 'gold' }, { plan: 'FREE' }, { plan: 1 }, { plan: null }, { name: 'x' }]) {
      const res = await gw.admin.inject({ method: 'POST', url: '/admin/keys', headers: auth, payload });
      expectError(res, 400, 'invalid_request');
    }
  });

  it('refuses perMinute above perDay', async () => {
    const res = await gw.admin.inject({
      method: 'POST',
      url: '/admin/keys',
      headers: auth,
      payload: { plan: 'enterprise', limits: { perMinute: 11, perDay: 10 } },
    });
    expectError(res, 400, 'invalid_request');
    expect(res.json().message).toMatch(/perMinute/);
  });

  it('accepts perMinute equal to perDay', async () => {
    const body = await createKey(gw, { plan: 'enterprise', limits: { perMinute: 10, perDay: 10 } });
    expect(body.limits).toEqual({ perMinute: 10, perDay: 10 });
  });

  it('refuses limits that are not positive integers, out of order, or empty', async () => {
    const bad = [
      { perMinute: 1.5, perDay: 10 },
      { perMinute: 1, perDay: 10.25 },
      { perMinute: '5', perDay: 10 },
      { perMinute: 0, perDay: 10 },
      { perMinute: -1, perDay: 10 },
      { perSecond: 10, perMinute: 5 },
      { perFortnight: 5 },
      {},
      'lots',
      [5, 50],
      null,
    ];
    for (const limits of bad) {
      const res = await gw.admin.inject({
        method: 'POST',
        url: '/admin/keys',
        headers: auth,
        payload: { plan: 'enterprise', limits },
      });
      expectError(res, 400, 'invalid_request');
    }
  });

  it('refuses a bad name', async () => {
    for (const name of ['', 'x'.repeat(101), 42]) {
      const res = await gw.admin.inject({
        method: 'POST',
        url: '/admin/keys',
        headers: auth,
        payload: { plan: 'free', name },
      });
      expectError(res, 400, 'invalid_request');
    }
  });

  it('ignores unknown fields (as every JSON body in the platform does) and never echoes them', async () => {
    // The shared validator drops properties the schema does not declare. Nothing unknown can
    // change a key: `limits` is the only way to set limits, and it is checked against the plan.
    const res = await gw.admin.inject({
      method: 'POST',
      url: '/admin/keys',
      headers: auth,
      payload: {
        plan: 'enterprise',
        limits: { perMinute: 3, perDay: 30, perFortnight: 1 },
        admin: true,
        id: 'key_mine',
      },
    });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json() as Created;
    expect(Object.keys(body).sort()).toEqual(['createdAt', 'id', 'key', 'limits', 'name', 'plan', 'scopes']);
    expect(body.id).not.toBe('key_mine');
    expect(body.limits).toEqual({ perMinute: 3, perDay: 30 });
  });

  it('refuses a missing body, an empty body, malformed JSON and a non-object', async () => {
    expectError(await gw.admin.inject({ method: 'POST', url: '/admin/keys', headers: auth }), 400, 'invalid_request');
    const json = { ...auth, 'content-type': 'application/json' };
    for (const payload of ['', '{"plan":', 'null', '[]', '"free"']) {
      expectError(
        await gw.admin.inject({ method: 'POST', url: '/admin/keys', headers: json, payload }),
        400,
        'invalid_request',
      );
    }
  });

  it('refuses a name that is not UTF-8 with 400, and creates nothing', async () => {
    const fresh = await startGateway({ upstream: upstream.url });
    try {
      // "Acme" then 0xff: a decoder that forgives would store "Acme\ufffd".
      const payload = Buffer.concat([
        Buffer.from('{"plan":"free","name":"Acme'),
        Buffer.from([0xff]),
        Buffer.from('"}'),
      ]);
      const res = await fresh.admin.inject({
        method: 'POST',
        url: '/admin/keys',
        headers: { ...auth, 'content-type': 'application/json' },
        payload,
      });
      expectError(res, 400, 'invalid_request');
      expect(res.json().message).toBe('Request body is not valid UTF-8 (JSON is UTF-8 text)');
      const list = await fresh.admin.inject({ method: 'GET', url: '/admin/keys', headers: auth });
      expect(list.json()).toEqual([]);
    } finally {
      await fresh.close();
    }
  });

  it('refuses a body that is not JSON with 415', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const res = await gw.admin.inject({
        method: 'POST',
        url: '/admin/keys',
        headers: { ...auth, 'content-type': type },
        payload: type === 'text/plain' ? '{"plan":"free"}' : 'plan=free',
      });
      expectError(res, 415, 'unsupported_media_type');
    }
  });

  it('creates nothing when it refuses', async () => {
    const fresh = await startGateway({ upstream: upstream.url });
    try {
      await fresh.admin.inject({ method: 'POST', url: '/admin/keys', headers: auth, payload: { plan: 'enterprise' } });
      await fresh.admin.inject({ method: 'POST', url: '/admin/keys', payload: { plan: 'free' } });
      const list = await fresh.admin.inject({ method: 'GET', url: '/admin/keys', headers: auth });
      expect(list.json()).toEqual([]);
    } finally {
      await fresh.close();
    }
  });
});

describe('admin authentication', () => {
  const own = gatewayWithOneKey();

  const routes = () => [
    { method: 'GET' as const, url: '/admin/keys' },
    { method: 'POST' as const, url: '/admin/keys', payload: { plan: 'free' } },
    { method: 'GET' as const, url: `/admin/keys/${own.existing.id}` },
    { method: 'DELETE' as const, url: `/admin/keys/${own.existing.id}` },
    { method: 'DELETE' as const, url: `/admin/keys/${own.existing.id}/ban` },
    { method: 'GET' as const, url: '/admin/unknown' },
  ];

  const sameLengthWrong = `${ADMIN_TOKEN.slice(0, -1)}${ADMIN_TOKEN.endsWith('x') ? 'y' : 'x'}`;
  const badHeaders: Record<string, Record<string, string>> = {
    'no Authorization header': {},
    'an empty Authorization header': { authorization: '' },
    'a wrong token of the same length': { authorization: `Bearer ${sameLengthWrong}` },
    'a shorter token': { authorization: `Bearer ${ADMIN_TOKEN.slice(0, -1)}` },
    'a longer token': { authorization: `Bearer ${ADMIN_TOKEN}0` },
    'the token without the Bearer scheme': { authorization: ADMIN_TOKEN },
    'the token as Basic credentials': { authorization: `Basic ${ADMIN_TOKEN}` },
    'Bearer with no token': { authorization: 'Bearer ' },
    'an API key instead of the token': { authorization: `Bearer ${generateApiKey()}` },
  };

  for (const [index, [label, headers]] of Object.entries(badHeaders).entries()) {
    it(`answers 401 to ${label} on every route`, async () => {
      // An address of its own per case: each makes fewer failures than the failed-auth limit.
      const remoteAddress = `192.0.2.${index + 1}`;
      for (const route of routes()) {
        const res = await own.gw.admin.inject({ ...route, headers, remoteAddress });
        expectError(res, 401, 'unauthorized');
        expect(res.headers['www-authenticate']).toMatch(/^Bearer realm="animal-store"/);
        expect(res.body).not.toContain(own.existing.id);
      }
    });
  }

  it.each([
    { name: 'no token', headers: {}, challenge: 'Bearer realm="animal-store"' },
    {
      name: 'a wrong token',
      headers: { authorization: `Bearer ${sameLengthWrong}` },
      challenge: 'Bearer realm="animal-store", error="invalid_token", error_description="The admin token is not valid"',
    },
  ])('answers 401 to $name with WWW-Authenticate: $challenge', async ({ headers, challenge }) => {
    const res = await own.gw.admin.inject({ url: '/admin/keys', headers, remoteAddress: '192.0.2.200' });
    expectError(res, 401, 'unauthorized');
    expect(res.headers['www-authenticate']).toBe(challenge);
  });

  it('changed nothing while refusing: the key still exists, unrevoked, and no key was added', async () => {
    const list = await own.gw.admin.inject({ method: 'GET', url: '/admin/keys', headers: auth });
    expect(list.statusCode).toBe(200);
    expect(list.json()).toHaveLength(1);
    expect(list.json()[0].id).toBe(own.existing.id);
    expect(list.json()[0]).not.toHaveProperty('revokedAt');
    expect((await pets(own.gw, own.existing.key)).statusCode).toBe(200);
  });

  it('accepts the scheme in any case', async () => {
    const res = await own.gw.admin.inject({
      method: 'GET',
      url: '/admin/keys',
      headers: { authorization: `bearer ${ADMIN_TOKEN}` },
    });
    expect(res.statusCode).toBe(200);
  });

  it('is not served on the public listener, even with the admin token', async () => {
    for (const route of routes()) {
      const res = await own.gw.app.inject({ ...route, headers: auth });
      expectError(res, 401, 'invalid_api_key');
    }
  });
});

describe('admin answers are never cached', () => {
  const own = gatewayWithOneKey();

  const json = { ...auth, 'content-type': 'application/json' };
  const cases = [
    {
      name: 'create (a plaintext key)',
      method: 'POST' as const,
      url: '/admin/keys',
      headers: json,
      payload: '{"plan":"free"}',
      status: 201,
    },
    {
      name: 'rotate (a plaintext key)',
      method: 'POST' as const,
      url: '/admin/keys/:id/rotate',
      headers: json,
      payload: '{}',
      status: 200,
    },
    { name: 'list', method: 'GET' as const, url: '/admin/keys', headers: auth, status: 200 },
    { name: 'show', method: 'GET' as const, url: '/admin/keys/:id', headers: auth, status: 200 },
    { name: 'an unknown id', method: 'GET' as const, url: '/admin/keys/key_nope', headers: auth, status: 404 },
    {
      name: 'a bad body',
      method: 'POST' as const,
      url: '/admin/keys',
      headers: json,
      payload: '{"plan":"gold"}',
      status: 400,
    },
    { name: 'no token', method: 'GET' as const, url: '/admin/keys', headers: {}, status: 401 },
    { name: 'a wrong method', method: 'PUT' as const, url: '/admin/keys', headers: auth, status: 405 },
    { name: 'an unknown route', method: 'GET' as const, url: '/admin/nope', headers: auth, status: 404 },
    { name: 'a URL that does not decode', method: 'GET' as const, url: '/admin/keys/%zz', headers: auth, status: 400 },
  ];

  it.each(cases)('$name → Cache-Control: no-store', async ({ status, url, ...request }) => {
    const res = await own.gw.admin.inject({ ...request, url: url.replace(':id', own.existing.id) });
    expect(res.statusCode, res.body).toBe(status);
    expect(res.headers['cache-control']).toBe('no-store');
  });
});

describe('failed admin authentication is limited per address', () => {
  let gw: TestGateway;
  let clock = Date.parse('2030-01-01T00:00:00Z');
  beforeAll(async () => {
    gw = await startGateway({ upstream: upstream.url, now: () => clock });
  });
  afterAll(async () => {
    await gw?.close();
  });

  const wrong = { authorization: `Bearer ${ADMIN_TOKEN.slice(0, -1)}#` };
  const send = (remoteAddress: string, headers: Record<string, string>) =>
    gw.admin.inject({ method: 'GET', url: '/admin/keys', headers, remoteAddress });

  async function fail(remoteAddress: string, times: number): Promise<number[]> {
    const statuses: number[] = [];
    for (let i = 0; i < times; i++) statuses.push((await send(remoteAddress, wrong)).statusCode);
    return statuses;
  }

  const cases = [
    { name: 'the 11th wrong token', headers: wrong },
    { name: 'the right token after 10 wrong ones (not even checked)', headers: auth },
    { name: 'no token at all', headers: {} },
  ];
  it.each(cases.map((c, i) => ({ ...c, address: `198.51.100.${i + 1}` })))(
    '$name → 429 admin_rate_limited with Retry-After until the minute ends',
    async ({ headers, address }) => {
      const started = clock;
      expect(await fail(address, 10)).toEqual(Array(10).fill(401));
      clock = started + 15_000;
      const res = await send(address, headers);
      expectError(res, 429, 'admin_rate_limited');
      expect(res.headers['retry-after']).toBe('45');
      // Other addresses are not affected.
      expect((await send('203.0.113.50', auth)).statusCode).toBe(200);
      // Once the minute since the first failure is over, the right token works again.
      clock = started + 60_000;
      expect((await send(address, auth)).statusCode).toBe(200);
    },
  );

  const noToken: { name: string; headers: Record<string, string> }[] = [
    { name: 'no Authorization header', headers: {} },
    { name: 'an empty Authorization header', headers: { authorization: '' } },
    { name: '"Bearer" with no token', headers: { authorization: 'Bearer ' } },
    { name: 'Basic credentials', headers: { authorization: 'Basic dXNlcjpwYXNz' } },
  ];
  it.each(noToken.map((c, i) => ({ ...c, address: `198.51.100.${50 + i}` })))(
    '20 requests with $name are 401 but no failures: the right token still works',
    async ({ headers, address }) => {
      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) statuses.push((await send(address, headers)).statusCode);
      expect(statuses).toEqual(Array(20).fill(401));
      expect((await send(address, auth)).statusCode).toBe(200);
      // Wrong tokens from the same address are still counted from zero: the 11th is refused.
      expect(await fail(address, 10)).toEqual(Array(10).fill(401));
      expectError(await send(address, wrong), 429, 'admin_rate_limited');
    },
  );

  it('counts failures within one minute only: 9 now and 9 a minute later are all 401', async () => {
    const address = '198.51.100.99';
    expect(await fail(address, 9)).toEqual(Array(9).fill(401));
    clock += 60_000;
    expect(await fail(address, 9)).toEqual(Array(9).fill(401));
    expect((await send(address, auth)).statusCode).toBe(200);
  });
});

describe('GET /admin/keys and /admin/keys/:id', () => {
  let gw: TestGateway;
  let free: Created;
  let enterprise: Created;
  beforeAll(async () => {
    gw = await startGateway({ upstream: upstream.url });
    free = await createKey(gw, { plan: 'free', name: 'listed' });
    enterprise = await createKey(gw, { plan: 'enterprise', limits: { perMinute: 4, perDay: 40 } });
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('lists every key without its plaintext or its hash', async () => {
    const res = await gw.admin.inject({ method: 'GET', url: '/admin/keys', headers: auth });
    expect(res.statusCode).toBe(200);
    for (const created of [free, enterprise]) {
      expect(res.body).not.toContain(created.key);
      expect(res.body).not.toContain(hashApiKey(created.key));
    }
    expect(res.body).not.toContain('"key"');
    expect(res.body).not.toContain('sha256');
    const list = res.json() as Array<Record<string, unknown>>;
    expect(list.map((k) => k.id).sort()).toEqual([free.id, enterprise.id].sort());
    const byId = new Map(list.map((k) => [k.id, k]));
    expect(byId.get(free.id)).toEqual({
      id: free.id,
      name: 'listed',
      plan: 'free',
      limits: { perMinute: 60, perDay: 1000 },
      scopes: ['pets:read', 'pets:write'],
      createdAt: free.createdAt,
      source: 'store',
      prefix: free.key.slice(0, 10),
    });
    expect(byId.get(enterprise.id)).toMatchObject({ plan: 'enterprise', limits: { perMinute: 4, perDay: 40 } });
  });

  it('shows one key without its plaintext or its hash', async () => {
    const res = await gw.admin.inject({ method: 'GET', url: `/admin/keys/${enterprise.id}`, headers: auth });
    expect(res.statusCode).toBe(200);
    expect(res.body).not.toContain(enterprise.key);
    expect(res.body).not.toContain(hashApiKey(enterprise.key));
    expect(res.body).not.toContain('sha256');
    expect(res.json()).toEqual({
      id: enterprise.id,
      name: enterprise.id,
      plan: 'enterprise',
      limits: { perMinute: 4, perDay: 40 },
      scopes: ['pets:read', 'pets:write'],
      createdAt: enterprise.createdAt,
      source: 'store',
      prefix: enterprise.key.slice(0, 10),
    });
  });

  it('answers 404 for an unknown id and 400 for an id that is too long', async () => {
    expectError(await gw.admin.inject({ method: 'GET', url: '/admin/keys/key_nope', headers: auth }), 404, 'not_found');
    expectError(
      await gw.admin.inject({ method: 'GET', url: `/admin/keys/${'k'.repeat(65)}`, headers: auth }),
      400,
      'invalid_request',
    );
  });

  it('answers 405 with Allow for a method a path does not take', async () => {
    const res = await gw.admin.inject({ method: 'PUT', url: '/admin/keys', headers: auth });
    expectError(res, 405, 'method_not_allowed');
    expect(res.headers.allow).toContain('POST');
  });
});

describe('DELETE /admin/keys/:id (revoke)', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startGateway({ upstream: upstream.url });
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('answers 204 and the key is refused with 401 invalid_api_key from then on', async () => {
    const created = await createKey(gw, { plan: 'pro' });
    const other = await createKey(gw, { plan: 'pro' });
    // Used once first, so the gateway has the key cached.
    expect((await pets(gw, created.key)).statusCode).toBe(200);

    const res = await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${created.id}`, headers: auth });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');

    expectError(await pets(gw, created.key), 401, 'invalid_api_key');
    expectError(await pets(gw, created.key), 401, 'invalid_api_key');
    expect((await pets(gw, other.key)).statusCode).toBe(200);

    const shown = await gw.admin.inject({ method: 'GET', url: `/admin/keys/${created.id}`, headers: auth });
    expect(shown.statusCode).toBe(200);
    expect(new Date(shown.json().revokedAt).toISOString()).toBe(shown.json().revokedAt);
    const listed = await gw.admin.inject({ method: 'GET', url: '/admin/keys', headers: auth });
    expect(listed.json().find((k: { id: string }) => k.id === created.id).revokedAt).toBe(shown.json().revokedAt);
    expect(listed.json().find((k: { id: string }) => k.id === other.id)).not.toHaveProperty('revokedAt');
  });

  it('is idempotent: revoking again answers 204 and keeps the first revocation time', async () => {
    // The record is kept with revokedAt, so the id stays known: a repeated DELETE (a retry) succeeds.
    const created = await createKey(gw, { plan: 'free' });
    expect(
      (await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${created.id}`, headers: auth })).statusCode,
    ).toBe(204);
    const first = (await gw.admin.inject({ method: 'GET', url: `/admin/keys/${created.id}`, headers: auth })).json();
    const again = await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${created.id}`, headers: auth });
    expect(again.statusCode).toBe(204);
    const second = (await gw.admin.inject({ method: 'GET', url: `/admin/keys/${created.id}`, headers: auth })).json();
    expect(second.revokedAt).toBe(first.revokedAt);
    expectError(await pets(gw, created.key), 401, 'invalid_api_key');
  });

  it('answers 404 for an unknown id', async () => {
    expectError(
      await gw.admin.inject({ method: 'DELETE', url: '/admin/keys/key_0000000000000000', headers: auth }),
      404,
      'not_found',
    );
  });
});

describe('DELETE /admin/keys/:id/ban (lift a ban)', () => {
  it('bans a free key on the 51st refusal after 60 admitted (BAN_THRESHOLD 50), and lifting it leaves only the rate limit', async () => {
    const gw = await startGateway({ upstream: upstream.url });
    try {
      const created = await createKey(gw, { plan: 'free' });
      for (let i = 1; i <= 60; i++) expect((await pets(gw, created.key)).statusCode, `request ${i}`).toBe(200);
      // Each refusal counts until the minute ends: refusals 1-50 are plain rate limiting, the 51st is the ban.
      for (let i = 1; i <= 50; i++) expectError(await pets(gw, created.key), 429, 'rate_limit_exceeded');
      const banned = await pets(gw, created.key);
      expectError(banned, 429, 'api_key_banned');
      const retryAfter = Number(banned.headers['retry-after']);
      expect(retryAfter).toBeGreaterThan(60);
      expect(retryAfter).toBeLessThanOrEqual(900);
      expectError(await pets(gw, created.key), 429, 'api_key_banned');

      const lift = await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${created.id}/ban`, headers: auth });
      expect(lift.statusCode).toBe(204);
      // The minute window is still spent, so the key is rate limited, no longer banned.
      expectError(await pets(gw, created.key), 429, 'rate_limit_exceeded');
    } finally {
      await gw.close();
    }
  });

  it('shows bannedUntil while banned; lifting clears it and the count of refusals', async () => {
    const gw = await startGateway({ upstream: upstream.url, env: { BAN_THRESHOLD: '2', BAN_GRACE_MS: '0' } });
    try {
      const created = await createKey(gw, { plan: 'enterprise', limits: { perMinute: 2, perDay: 100 } });
      const show = () => gw.admin.inject({ method: 'GET', url: `/admin/keys/${created.id}`, headers: auth });
      expect((await pets(gw, created.key)).statusCode).toBe(200);
      expect((await pets(gw, created.key)).statusCode).toBe(200);
      expectError(await pets(gw, created.key), 429, 'rate_limit_exceeded');
      expectError(await pets(gw, created.key), 429, 'rate_limit_exceeded');
      expect((await show()).json()).not.toHaveProperty('bannedUntil');

      const banned = await pets(gw, created.key);
      expectError(banned, 429, 'api_key_banned');
      const shown = (await show()).json();
      expect(new Date(shown.bannedUntil).toISOString()).toBe(shown.bannedUntil);
      const untilMs = Date.parse(shown.bannedUntil);
      expect(untilMs).toBeGreaterThan(Date.now() + 800_000);
      expect(untilMs).toBeLessThanOrEqual(Date.now() + 900_000);
      expect(Number(banned.headers['x-ratelimit-reset'])).toBe(Math.ceil(untilMs / 1000));
      const listed = (await gw.admin.inject({ method: 'GET', url: '/admin/keys', headers: auth })).json();
      expect(listed.find((k: { id: string }) => k.id === created.id).bannedUntil).toBe(shown.bannedUntil);

      const lift = await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${created.id}/ban`, headers: auth });
      expect(lift.statusCode).toBe(204);
      expect(lift.body).toBe('');
      expect((await show()).json()).not.toHaveProperty('bannedUntil');

      // Still over the minute limit: plain rate limiting again, and the refusals count from zero.
      expectError(await pets(gw, created.key), 429, 'rate_limit_exceeded');
      expectError(await pets(gw, created.key), 429, 'rate_limit_exceeded');
      expectError(await pets(gw, created.key), 429, 'api_key_banned');
    } finally {
      await gw.close();
    }
  });

  it('answers 204 for a key that is not banned, and 404 for an unknown id', async () => {
    const gw = await startGateway({ upstream: upstream.url });
    try {
      const created = await createKey(gw, { plan: 'free' });
      const res = await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${created.id}/ban`, headers: auth });
      expect(res.statusCode).toBe(204);
      expect((await pets(gw, created.key)).statusCode).toBe(200);
      expectError(
        await gw.admin.inject({ method: 'DELETE', url: '/admin/keys/key_0000000000000000/ban', headers: auth }),
        404,
        'not_found',
      );
    } finally {
      await gw.close();
    }
  });
});

describe('keys from API_KEYS_FILE', () => {
  let dir: string;
  let gw: TestGateway;
  const fileKey = generateApiKey();
  const enterpriseKey = generateApiKey();

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-admin-'));
    const path = join(dir, 'keys.json');
    await writeFile(
      path,
      JSON.stringify([
        { id: 'key_fromfile', name: 'GitOps key', plan: 'business', sha256: hashApiKey(fileKey) },
        {
          id: 'key_fromfile_ent',
          plan: 'enterprise',
          limits: { perMinute: 3, perDay: 30 },
          sha256: hashApiKey(enterpriseKey),
        },
      ]),
    );
    gw = await startGateway({ upstream: upstream.url, env: { API_KEYS_FILE: path } });
  });
  afterAll(async () => {
    await gw?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('lists them with source "file" beside store keys, without their hashes', async () => {
    const stored = await createKey(gw, { plan: 'free' });
    const res = await gw.admin.inject({ method: 'GET', url: '/admin/keys', headers: auth });
    expect(res.statusCode).toBe(200);
    expect(res.body).not.toContain(hashApiKey(fileKey));
    expect(res.body).not.toContain(fileKey);
    const list = res.json() as Array<Record<string, unknown>>;
    const byId = new Map(list.map((k) => [k.id, k]));
    expect(list).toHaveLength(3);
    expect(byId.get('key_fromfile')).toMatchObject({
      id: 'key_fromfile',
      name: 'GitOps key',
      plan: 'business',
      limits: { perMinute: 1000, perDay: 100000 },
      source: 'file',
    });
    expect(byId.get('key_fromfile')).not.toHaveProperty('prefix');
    expect(byId.get('key_fromfile_ent')).toMatchObject({
      name: 'key_fromfile_ent',
      plan: 'enterprise',
      limits: { perMinute: 3, perDay: 30 },
      source: 'file',
    });
    expect(byId.get(stored.id)).toMatchObject({ source: 'store' });
  });

  it('shows one with source "file"', async () => {
    const res = await gw.admin.inject({ method: 'GET', url: '/admin/keys/key_fromfile', headers: auth });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ id: 'key_fromfile', source: 'file', plan: 'business' });
  });

  it('refuses to revoke one with 409 conflict, and the key keeps working', async () => {
    const res = await gw.admin.inject({ method: 'DELETE', url: '/admin/keys/key_fromfile', headers: auth });
    expectError(res, 409, 'conflict');
    expect(res.json().message).toMatch(/API_KEYS_FILE/);
    const proxied = await pets(gw, fileKey);
    expect(proxied.statusCode).toBe(200);
    expect(proxied.headers['x-ratelimit-limit']).toBe('1000');
    const shown = await gw.admin.inject({ method: 'GET', url: '/admin/keys/key_fromfile', headers: auth });
    expect(shown.json()).not.toHaveProperty('revokedAt');
  });

  it("enforces a file key's enterprise limits", async () => {
    for (let i = 0; i < 3; i++) {
      const res = await pets(gw, enterpriseKey);
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBe('3');
    }
    expectError(await pets(gw, enterpriseKey), 429, 'rate_limit_exceeded');
  });
});
