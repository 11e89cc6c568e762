import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, bearer, type GatewayOptions, type TestGateway, useGateways } from '../support/helpers.js';

/*
 * Idempotency-Key on the admin POSTs that create something: a repeat gets the first answer, secret
 * included; another body under the same key is refused; duplicates at once create one thing and
 * one audit line. What a Redis stall does to a create is in tests/faults/admin-idempotency.test.ts.
 */

const gateways = useGateways();
const admin = bearer(ADMIN_TOKEN);

const CREATES = [
  ['POST /admin/keys', '/admin/keys', { plan: 'free', name: 'acme' }, { plan: 'pro' }, 'key.created'],
  [
    'POST /admin/webhooks',
    '/admin/webhooks',
    { url: 'http://127.0.0.1:9/hook', events: ['key.banned'] },
    { url: 'http://127.0.0.1:9/other', events: ['key.banned'] },
    'webhook.created',
  ],
  [
    'POST /admin/customers',
    '/admin/customers',
    { name: 'Acme', plan: 'pro' },
    { name: 'Acme', plan: 'free' },
    'customer.created',
  ],
] as const;

const LIMITERS: Array<[string, GatewayOptions]> = [
  ['embedded (memory)', { redisUrl: null }],
  ['Redis', {}],
];

describe.each(LIMITERS)('Idempotency-Key, %s', (_label, options) => {
  async function start(logs: Record<string, unknown>[] = []): Promise<TestGateway> {
    return gateways.start({
      ...options,
      logs,
      env: {
        LOG_LEVEL: 'info',
        WEBHOOKS_ALLOW_INSECURE: 'true',
        WEBHOOKS_ALLOW_PRIVATE: 'true',
        // Not about timeouts: on a loaded machine a first try that timed out would answer 503.
        REDIS_COMMAND_TIMEOUT_MS: '2000',
      },
    });
  }

  function post(gw: TestGateway, url: string, payload: object, key?: string): Promise<LightMyRequestResponse> {
    return gw.admin.inject({
      method: 'POST',
      url,
      headers: { ...admin, ...(key === undefined ? {} : { 'idempotency-key': key }) },
      payload,
    });
  }

  async function count(gw: TestGateway, url: string): Promise<number> {
    const listed = (await gw.admin.inject({ url, headers: admin })).json();
    // Keys and webhooks list as an array, customers a page at a time.
    return Array.isArray(listed) ? listed.length : listed.items.length;
  }

  describe.each(CREATES)('%s', (_route, url, body, otherBody, action) => {
    it('answers a repeat with the first answer, secret included, and creates once', async () => {
      const logs: Record<string, unknown>[] = [];
      const gw = await start(logs);
      const key = randomUUID();
      const first = await post(gw, url, body, key);
      expect(first.statusCode, first.body).toBe(201);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      // Field order does not make another body.
      const reordered = Object.fromEntries(Object.entries(body).reverse());
      const again = await post(gw, url, reordered, key);
      expect(again.statusCode, again.body).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.json()).toEqual(first.json());
      expect(await count(gw, url)).toBe(1);
      expect(logs.filter((l) => l.audit === action)).toHaveLength(1);
      // Without a key, or with another, each POST creates.
      expect((await post(gw, url, body)).statusCode).toBe(201);
      expect((await post(gw, url, body, randomUUID())).statusCode).toBe(201);
      expect(await count(gw, url)).toBe(3);
    });

    it('refuses the same key with another body (422), or on another route, creating nothing', async () => {
      const gw = await start();
      const key = randomUUID();
      expect((await post(gw, url, body, key)).statusCode).toBe(201);
      const other = await post(gw, url, otherBody, key);
      expect(other.statusCode, other.body).toBe(422);
      expect(other.json()).toEqual({ code: 'idempotency_key_reused', message: expect.any(String), status: 422 });
      const elsewhere = CREATES.find(([, u]) => u !== url) as (typeof CREATES)[number];
      const crossed = await post(gw, elsewhere[1], elsewhere[2], key);
      expect(crossed.statusCode, crossed.body).toBe(422);
      expect(await count(gw, url)).toBe(1);
      expect(await count(gw, elsewhere[1])).toBe(0);
    });

    it('creates once for 20 duplicates at once: one thing, one audit line, the same answer to all', async () => {
      const logs: Record<string, unknown>[] = [];
      const gw = await start(logs);
      const key = randomUUID();
      const answers = await Promise.all(Array.from({ length: 20 }, () => post(gw, url, body, key)));
      expect(answers.map((a) => a.statusCode)).toEqual(Array(20).fill(201));
      expect(new Set(answers.map((a) => a.body)).size).toBe(1);
      expect(await count(gw, url)).toBe(1);
      expect(logs.filter((l) => l.audit === action)).toHaveLength(1);
    });

    it('refuses a bad Idempotency-Key with 400 naming it, creating nothing', async () => {
      const gw = await start();
      for (const bad of ['', 'a b', 'x'.repeat(256), 'é']) {
        const res = await gw.admin.inject({
          method: 'POST',
          url,
          headers: { ...admin, 'idempotency-key': bad },
          payload: body,
        });
        expect(res.statusCode, JSON.stringify(bad)).toBe(400);
        expect(res.json().message).toMatch(/Idempotency-Key/);
      }
      expect(await count(gw, url)).toBe(0);
    });
  });

  it('POST /admin/keys/:id/rotate: a repeat, or 20 at once, rotate once; the old secret keeps its grace', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await start(logs);
    const created = (await post(gw, '/admin/keys', { plan: 'free' })).json();
    const url = `/admin/keys/${created.id}/rotate`;
    const key = randomUUID();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => post(gw, url, { gracePeriodSeconds: 600 }, key)),
    );
    expect(answers.map((a) => a.statusCode)).toEqual(Array(20).fill(200));
    expect(new Set(answers.map((a) => a.body)).size).toBe(1);
    const again = await post(gw, url, { gracePeriodSeconds: 600 }, key);
    expect(again.body).toBe(answers[0]?.body);
    const rotated = again.json();
    // Rotated once: a second rotation would have ended the original secret at once.
    for (const secret of [created.key, rotated.key]) {
      expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(secret) })).statusCode).toBe(200);
    }
    expect(logs.filter((l) => l.audit === 'key.rotated')).toHaveLength(1);
    expect((await post(gw, url, { gracePeriodSeconds: 60 }, key)).statusCode).toBe(422);
  });

  it('a replayed API key works, and what is kept for the replay holds no secret in the clear', async () => {
    const gw = await start();
    const key = randomUUID();
    const answered = await post(gw, '/admin/keys', { plan: 'free' }, key);
    expect(answered.statusCode, answered.body).toBe(201);
    const first = answered.json();
    const again = (await post(gw, '/admin/keys', { plan: 'free' }, key)).json();
    expect(again.key).toBe(first.key);
    expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(again.key) })).statusCode).toBe(200);
    const hook = (
      await post(gw, '/admin/webhooks', { url: 'http://127.0.0.1:9/h', events: ['key.banned'] }, randomUUID())
    ).json();
    if (gw.redis) {
      const names = await gw.redis.keys(`${gw.config.redisPrefix}idempotency:*`);
      expect(names).toHaveLength(2);
      for (const name of names) {
        const value = (await gw.redis.get(name)) ?? '';
        expect(value).not.toContain(first.key);
        expect(value).not.toContain(hook.secret);
        expect(value).not.toContain(key);
        expect(name).not.toContain(key);
      }
    }
  });
});
