import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey, hashApiKey } from '../../../src/keys/api-key.js';
import { auth, type Created, createKey, expectError, PLAN_TABLE, pets, useEchoUpstream } from '../../support/admin.js';
import { startGateway, type TestGateway } from '../../support/helpers.js';

// The keys resource (admin/routes/keys.ts): create, list, show, revoke, and the keys of
// API_KEYS_FILE beside the stored ones.
const upstream = useEchoUpstream();

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

  it('refuses unknown fields, naming them, and makes no key (bodies.test.ts has the rest)', async () => {
    const before = (await gw.admin.inject({ url: '/admin/keys', headers: auth })).json().items.length;
    const res = await gw.admin.inject({
      method: 'POST',
      url: '/admin/keys',
      headers: auth,
      payload: { plan: 'enterprise', limits: { perMinute: 3, perDay: 30 }, id: 'key_mine' },
    });
    expectError(res, 400, 'invalid_request');
    expect(res.json().message).toMatch(/^body\.id is not a known field/);
    expect((await gw.admin.inject({ url: '/admin/keys', headers: auth })).json().items).toHaveLength(before);
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
      expect(list.json()).toEqual({ items: [], next: null });
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
      expect(list.json()).toEqual({ items: [], next: null });
    } finally {
      await fresh.close();
    }
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
    const list = res.json().items as Array<Record<string, unknown>>;
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
    expect(listed.json().items.find((k: { id: string }) => k.id === created.id).revokedAt).toBe(shown.json().revokedAt);
    expect(listed.json().items.find((k: { id: string }) => k.id === other.id)).not.toHaveProperty('revokedAt');
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
    const list = res.json().items as Array<Record<string, unknown>>;
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
