import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { metricValue } from '@animal-store/tests/support/service-process.js';
import { describe, expect, it } from 'vitest';
import { generateApiKey } from '../../src/keys/api-key.js';
import { createKey } from '../../src/keys/create-key.js';
import { impatientClient, politeWorkers } from '../support/clients.js';
import { ADMIN_TOKEN, addKey, bearer, type TestGateway, useGateways } from '../support/helpers.js';

const gateways = useGateways();

function gateway(env: Record<string, string> = {}, upstream?: string): Promise<TestGateway> {
  return gateways.start({ env, ...(upstream ? { upstream } : {}) });
}

const RATELIMIT = /^"minute";r=\d+;t=\d+, "day";r=\d+;t=\d+$/;

function expectError(
  res: { statusCode: number; headers: Record<string, unknown>; json(): unknown; body: string },
  status: number,
  code: string,
) {
  expect(res.statusCode).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
  const body = res.json() as Record<string, unknown>;
  expect(body).toEqual({ code, message: expect.any(String), status });
  expect(res.body).not.toMatch(/at .*\.(ts|js):\d+/);
}

function nextUtcMidnight(): number {
  return (Math.floor(Date.now() / 86_400_000) + 1) * 86_400_000;
}

function expectRateLimitHeaders(headers: Record<string, unknown>, limit: number, remaining: number) {
  expect(headers['x-ratelimit-limit']).toBe(String(limit));
  expect(headers['x-ratelimit-remaining']).toBe(String(remaining));
  const reset = Number(headers['x-ratelimit-reset']);
  expect(Number.isInteger(reset)).toBe(true);
  expect(reset).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000));
}

describe('authentication', () => {
  it('answers 401 missing_api_key without an Authorization header, with the per-IP limiter headers', async () => {
    const gw = await gateway();
    const res = await gw.app.inject({ url: '/v1/pets' });
    expectError(res, 401, 'missing_api_key');
    expectRateLimitHeaders(res.headers, 60, 59);
    expect(res.headers['ratelimit-policy']).toBe('"anonymous";q=60;w=60');
    expect(res.headers.ratelimit).toMatch(/^"anonymous";r=59;t=\d+$/);
  });

  it.each([
    ['another scheme', 'Basic dXNlcjpwYXNz', 'missing_api_key'],
    ['an empty bearer', 'Bearer ', 'missing_api_key'],
    ['garbage', 'Bearer not-a-key', 'invalid_api_key'],
    ['a key with a bad checksum', `Bearer ${generateApiKey().slice(0, -1)}0`, 'invalid_api_key'],
    ['a key with a wrong prefix', `Bearer xyz_${generateApiKey().slice(4)}`, 'invalid_api_key'],
    ['a well-formed key nobody issued', `Bearer ${generateApiKey()}`, 'invalid_api_key'],
    ['an oversized key', `Bearer ${'a'.repeat(5000)}`, 'invalid_api_key'],
  ])('answers 401 for %s', async (_label, authorization, code) => {
    const gw = await gateway();
    const res = await gw.app.inject({ url: '/v1/pets', headers: { authorization } });
    expectError(res, 401, code);
    expect(res.headers['x-ratelimit-limit']).toBe('60');
  });

  it.each([
    ['alone', (key: string) => key],
    ['after another scheme', (key: string) => `Token ${key}`],
  ])('answers 401 invalid_api_key with a hint to use Bearer for a well-formed key sent %s', async (_l, header) => {
    const gw = await gateway();
    const { key } = await addKey(gw.deps, 'free');
    const res = await gw.app.inject({ url: '/v1/pets', headers: { authorization: header(key) } });
    expectError(res, 401, 'invalid_api_key');
    expect(res.json().message).toBe(
      'The API key needs the scheme in front of it: send "Authorization: Bearer <API_KEY>"',
    );
  });

  it('gives no "put Bearer in front" hint to a Bearer header with a word before a well-formed key', async () => {
    const gw = await gateway();
    const { key } = await addKey(gw.deps, 'free');
    const res = await gw.app.inject({ url: '/v1/pets', headers: { authorization: `Bearer extra ${key}` } });
    expectError(res, 401, 'missing_api_key');
    expect(res.json().message).toBe('Send your API key as "Authorization: Bearer <API_KEY>"');
  });

  it('answers 404 (not 401) for a path nothing serves without a key, counted as a keyless request', async () => {
    const gw = await gateway();
    const res = await gw.app.inject({ url: '/v1/nowhere' });
    expectError(res, 404, 'not_found');
    expectRateLimitHeaders(res.headers, 60, 59);
    const metrics = await gw.deps.registry.metrics();
    expect(metrics).toMatch(/gateway_anonymous_requests_total\{[^}]*reason="missing"[^}]*\} 1/);
  });

  it('answers 404 for a path nothing serves with an empty Authorization header, as without one', async () => {
    const gw = await gateway();
    const res = await gw.app.inject({ url: '/v1/nowhere', headers: { authorization: '' } });
    expectError(res, 404, 'not_found');
    expectRateLimitHeaders(res.headers, 60, 59);
  });

  it('answers 429 (not 404) for a path nothing serves to an address over its keyless limit', async () => {
    const gw = await gateway({ ANON_PER_MINUTE: '1' });
    expectError(await gw.app.inject({ url: '/v1/pets' }), 401, 'missing_api_key');
    const res = await gw.app.inject({ url: '/v1/nowhere' });
    expectError(res, 429, 'rate_limit_exceeded');
    expectRateLimitHeaders(res.headers, 1, 0);
  });

  it('counts requests for the API reference against the address, with a key or without, as reason "reference"', async () => {
    const gw = await gateway();
    const { key } = await addKey(gw.deps, 'pro');
    await gw.app.inject({ url: '/v1/openapi.json' });
    const res = await gw.app.inject({ url: '/v1/openapi.json', headers: bearer(key) });
    expect(res.headers['x-ratelimit-limit']).toBe('60');
    expect(res.headers['x-ratelimit-remaining']).toBe('58');
    const metrics = await gw.deps.registry.metrics();
    expect(metricValue(metrics, 'gateway_anonymous_requests_total', { reason: 'reference' })).toBe(2);
    expect(metricValue(metrics, 'gateway_rate_limit_decisions_total')).toBe(0);
  });

  it('refuses malformed keys without asking the key store', async () => {
    const gw = await gateway();
    for (const key of ['nope', generateApiKey().replace(/.$/, '!'), `${generateApiKey()}x`]) {
      await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    }
    const metrics = await gw.deps.registry.metrics();
    expect(metrics).not.toMatch(/gateway_key_store_duration_seconds_count\{[^}]*\} [1-9]/);
    await gw.app.inject({ url: '/v1/pets', headers: bearer(generateApiKey()) });
    const after = await gw.deps.registry.metrics();
    expect(after).toMatch(/gateway_key_store_duration_seconds_count\{[^}]*operation="findByHash"[^}]*\} 1/);
  });

  it('asks the key store once for a known key, not on every request', async () => {
    const gw = await gateway();
    const { key } = await addKey(gw.deps, 'pro');
    for (let i = 0; i < 3; i++)
      expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode).toBe(200);
    const metrics = await gw.deps.registry.metrics();
    expect(metrics).toMatch(/gateway_key_store_duration_seconds_count\{[^}]*operation="findByHash"[^}]*\} 1\n/);
  });

  it('asks the key store once for a well-formed key nobody issued, and refuses it each time', async () => {
    const gw = await gateway();
    const key = generateApiKey();
    for (let i = 0; i < 3; i++)
      expectError(await gw.app.inject({ url: '/v1/pets', headers: bearer(key) }), 401, 'invalid_api_key');
    const metrics = await gw.deps.registry.metrics();
    expect(metrics).toMatch(/gateway_key_store_duration_seconds_count\{[^}]*operation="findByHash"[^}]*\} 1\n/);
  });

  it('limits requests without a valid key per client IP, with Retry-After', async () => {
    const gw = await gateway({ ANON_PER_MINUTE: '3' });
    for (let i = 0; i < 3; i++) expectError(await gw.app.inject({ url: '/v1/pets' }), 401, 'missing_api_key');
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer('garbage') });
    expectError(res, 429, 'rate_limit_exceeded');
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60);
    expectRateLimitHeaders(res.headers, 3, 0);
    // Another address is not affected.
    const other = await gw.app.inject({ url: '/v1/pets', remoteAddress: '10.9.8.7' });
    expectError(other, 401, 'missing_api_key');
  });

  it.each([
    ['embedded', { redisUrl: null }],
    ['Redis', {}],
  ])('tells a client without a valid key to retry when its address window resets, not sooner (%s)', async (_l, o) => {
    const gw = await gateways.start({ ...o, env: { ANON_PER_MINUTE: '2' } });
    for (let i = 0; i < 2; i++) expectError(await gw.app.inject({ url: '/v1/pets' }), 401, 'missing_api_key');
    const res = await gw.app.inject({ url: '/v1/pets' });
    expectError(res, 429, 'rate_limit_exceeded');
    const retryAfter = Number(res.headers['retry-after']);
    const untilReset = Number(res.headers['x-ratelimit-reset']) - Date.now() / 1000;
    // The window began a moment ago: nearly a minute is left, and Retry-After says so.
    expect(Math.abs(retryAfter - untilReset)).toBeLessThanOrEqual(1);
    expect(retryAfter).toBeGreaterThan(50);
  });

  it('does not let a spoofed X-Forwarded-For from an untrusted peer pick the limiter key', async () => {
    const gw = await gateway({ ANON_PER_MINUTE: '2' });
    for (let i = 0; i < 2; i++) {
      await gw.app.inject({ url: '/v1/pets', headers: { 'x-forwarded-for': `203.0.113.${i}` } });
    }
    const res = await gw.app.inject({ url: '/v1/pets', headers: { 'x-forwarded-for': '203.0.113.99' } });
    expectError(res, 429, 'rate_limit_exceeded');
  });

  it('refuses a revoked key', async () => {
    const gw = await gateway();
    const { id, key } = await addKey(gw.deps, 'pro');
    expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode).toBe(200);
    const revoke = await gw.admin.inject({
      method: 'DELETE',
      url: `/admin/keys/${id}`,
      headers: bearer('test-admin-token-0123456789'),
    });
    expect(revoke.statusCode).toBe(204);
    expectError(await gw.app.inject({ url: '/v1/pets', headers: bearer(key) }), 401, 'invalid_api_key');
  });
});

describe('WWW-Authenticate on every 401 (RFC 6750 §3)', () => {
  const REALM_ONLY = 'Bearer realm="animal-store"';
  const invalidToken = (description: string) =>
    `Bearer realm="animal-store", error="invalid_token", error_description="${description}"`;

  /** Each case makes, on its own gateway, the Authorization header to send (undefined: none). */
  type Case = {
    name: string;
    code: string;
    challenge: string;
    message: RegExp;
    /** What the request is counted as against its address. */
    reason: string;
    header: (gw: TestGateway) => Promise<string | undefined>;
  };
  const SEND_BEARER = /^Send your API key as "Authorization: Bearer <API_KEY>"$/;
  const NOT_VALID = /^The API key is not valid$/;
  const cases: Case[] = [
    {
      name: 'no Authorization header',
      code: 'missing_api_key',
      challenge: REALM_ONLY,
      message: SEND_BEARER,
      reason: 'missing',
      header: async () => undefined,
    },
    {
      name: 'an empty bearer',
      code: 'missing_api_key',
      challenge: REALM_ONLY,
      message: SEND_BEARER,
      reason: 'missing',
      header: async () => 'Bearer ',
    },
    {
      name: 'another scheme',
      code: 'missing_api_key',
      challenge: REALM_ONLY,
      message: SEND_BEARER,
      reason: 'missing',
      header: async () => 'Basic dXNlcjpwYXNz',
    },
    {
      name: 'a malformed key',
      code: 'invalid_api_key',
      challenge: invalidToken('The API key is not valid'),
      message: NOT_VALID,
      reason: 'malformed',
      header: async () => 'Bearer not-a-key',
    },
    {
      name: 'a well-formed key nobody issued',
      code: 'invalid_api_key',
      challenge: invalidToken('The API key is not valid'),
      message: NOT_VALID,
      reason: 'unknown',
      header: async () => `Bearer ${generateApiKey()}`,
    },
    {
      name: 'a revoked key',
      code: 'invalid_api_key',
      challenge: invalidToken('The API key is not valid'),
      message: NOT_VALID,
      reason: 'unknown',
      header: async (gw) => {
        const { id, key } = await addKey(gw.deps, 'pro');
        await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${id}`, headers: bearer(ADMIN_TOKEN) });
        return `Bearer ${key}`;
      },
    },
    {
      name: 'a key without the Bearer scheme',
      code: 'invalid_api_key',
      challenge: invalidToken('Send the API key with the Bearer scheme'),
      message: /^The API key needs the scheme in front of it: send "Authorization: Bearer <API_KEY>"$/,
      reason: 'malformed',
      header: async (gw) => (await addKey(gw.deps, 'free')).key,
    },
    {
      name: 'an expired key',
      code: 'expired_api_key',
      challenge: invalidToken('The API key has expired'),
      message: /^This API key expired at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/,
      reason: 'expired',
      header: async (gw) => {
        const { key, record } = createKey({ plan: 'pro', expiresAt: new Date(Date.now() - 1_000).toISOString() });
        await gw.deps.keyStore.insert(record);
        return `Bearer ${key}`;
      },
    },
    {
      name: 'a rotated-out key past its grace',
      code: 'expired_api_key',
      challenge: invalidToken('The API key was replaced by a newer one and its grace period has ended'),
      message: /^This API key was replaced by a newer one and stopped working at \d{4}-\d\d-\d\dT[\d:.]{12}Z$/,
      reason: 'expired',
      header: async (gw) => {
        const { id, key } = await addKey(gw.deps, 'pro');
        await gw.admin.inject({
          method: 'POST',
          url: `/admin/keys/${id}/rotate`,
          headers: bearer(ADMIN_TOKEN),
          payload: { gracePeriodSeconds: 0 },
        });
        return `Bearer ${key}`;
      },
    },
  ];

  it.each(cases)('$name → 401 $code with its challenge and message, counted as $reason', async (c) => {
    const gw = await gateway();
    const authorization = await c.header(gw);
    const res = await gw.app.inject({ url: '/v1/pets', headers: authorization === undefined ? {} : { authorization } });
    expectError(res, 401, c.code);
    expect(res.headers['www-authenticate']).toBe(c.challenge);
    expect(res.json().message).toMatch(c.message);
    const metrics = await gw.deps.registry.metrics();
    expect(metricValue(metrics, 'gateway_anonymous_requests_total', { reason: c.reason, decision: 'allowed' })).toBe(1);
    expect(metricValue(metrics, 'gateway_anonymous_requests_total')).toBe(1);
  });
});

describe('proxying an admitted request', () => {
  it('forwards to the upstream with identity headers and without the caller credentials', async () => {
    const gw = await gateway();
    const { id, key } = await addKey(gw.deps, 'pro');
    const res = await gw.app.inject({
      url: '/v1/pets?limit=5&status=sold',
      headers: {
        ...bearer(key),
        'x-request-id': 'trace-abc.123',
        'x-api-key-id': 'spoofed',
        'x-api-plan': 'enterprise',
      },
    });
    expect(res.statusCode).toBe(200);
    const seen = res.json() as { url: string; headers: Record<string, string> };
    expect(seen.url).toBe('/v1/pets?limit=5&status=sold');
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers['x-api-key-id']).toBe(id);
    expect(seen.headers['x-api-plan']).toBe('pro');
    expect(seen.headers['x-request-id']).toBe('trace-abc.123');
    expect(res.headers['x-request-id']).toBe('trace-abc.123');
  });

  it('generates a request id when the caller sends none or an unsafe one', async () => {
    const gw = await gateway();
    const { key } = await addKey(gw.deps, 'pro');
    const res = await gw.app.inject({
      url: '/v1/pets',
      headers: { ...bearer(key), 'x-request-id': 'bad id\twith spaces' },
    });
    const seen = res.json() as { headers: Record<string, string> };
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(seen.headers['x-request-id']).toBe(res.headers['x-request-id']);
  });

  it('puts its own rate-limit headers on proxied responses and never the upstream ones', async () => {
    const gw = await gateway();
    const { key } = await addKey(gw.deps, 'free');
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expectRateLimitHeaders(res.headers, 60, 59);
    expect(res.headers['ratelimit-policy']).toBe('"minute";q=60;w=60, "day";q=1000;w=86400');
    expect(res.headers.ratelimit).toMatch(RATELIMIT);
    expect(String(res.headers.ratelimit)).toContain('"minute";r=59;');
    expect(String(res.headers.ratelimit)).toContain('"day";r=999;');
    expect(JSON.stringify(res.headers)).not.toContain('upstream');
    expect(JSON.stringify(res.headers)).not.toContain('999999');
  });

  it('keeps the headers on upstream 404s and on gateway 404s', async () => {
    const gw = await gateway();
    const { key } = await addKey(gw.deps, 'free');
    const upstream404 = await gw.app.inject({ url: '/v1/pets/404', headers: bearer(key) });
    expectError(upstream404, 404, 'not_found');
    expectRateLimitHeaders(upstream404.headers, 60, 59);
    const gateway404 = await gw.app.inject({ url: '/nowhere', headers: bearer(key) });
    expectError(gateway404, 404, 'not_found');
    expectRateLimitHeaders(gateway404.headers, 60, 58);
  });

  it('answers 503 upstream_unavailable with the headers when the upstream refuses connections', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const gw = await gateway({}, `http://127.0.0.1:${port}`);
    const { key } = await addKey(gw.deps, 'free');
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expectError(res, 503, 'upstream_unavailable');
    expectRateLimitHeaders(res.headers, 60, 59);
  });

  it('serves a real client over a socket', async () => {
    const gw = await gateway();
    const { key } = await addKey(gw.deps, 'business');
    const url = await gw.listen();
    const res = await fetch(`${url}/v1/pets`, { headers: bearer(key) });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ratelimit-limit')).toBe('1000');
    expect(res.headers.get('x-ratelimit-remaining')).toBe('999');
  });
});

describe('limits', () => {
  it('admits 60 requests of a free key in a minute, then 429 with Retry-After', async () => {
    const gw = await gateway();
    const { key } = await addKey(gw.deps, 'free');
    for (let i = 0; i < 60; i++) {
      const ok = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
      expect(ok.statusCode).toBe(200);
      expect(ok.headers['x-ratelimit-remaining']).toBe(String(59 - i));
    }
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expectError(res, 429, 'rate_limit_exceeded');
    const retryAfter = Number(res.headers['retry-after']);
    expect(res.json().message).toMatch(
      /^Rate limit exceeded for the free plan: the minute window \(60 per minute\) is used up; it resets on \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/,
    );
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expectRateLimitHeaders(res.headers, 60, 0);
    expect(Number(res.headers['x-ratelimit-reset'])).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 60);
    // The refusal consumed nothing from the day window.
    expect(String(res.headers.ratelimit)).toContain('"day";r=940;');
  });

  it.each([
    ['embedded', { redisUrl: null }],
    ['Redis', {}],
  ])('tells a keyed client to retry when its minute window resets, not sooner (%s)', async (_l, o) => {
    const gw = await gateways.start(o);
    const { key } = await addKey(gw.deps, 'enterprise', { perMinute: 2, perDay: 100 });
    for (let i = 0; i < 2; i++)
      expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode).toBe(200);
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expectError(res, 429, 'rate_limit_exceeded');
    const retryAfter = Number(res.headers['retry-after']);
    const untilReset = Number(res.headers['x-ratelimit-reset']) - Date.now() / 1000;
    expect(Math.abs(retryAfter - untilReset)).toBeLessThanOrEqual(1);
    expect(retryAfter).toBeGreaterThan(50);
  });

  it('shows the day window as binding for an enterprise key with perDay 5', async () => {
    const gw = await gateway();
    const { key } = await addKey(gw.deps, 'enterprise', { perMinute: 100, perDay: 5 });
    for (let i = 0; i < 5; i++) {
      const ok = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
      expect(ok.statusCode).toBe(200);
      expectRateLimitHeaders(ok.headers, 5, 4 - i);
      // The day is a calendar quota: it resets at 00:00 UTC.
      expect(Number(ok.headers['x-ratelimit-reset'])).toBe(Math.ceil(nextUtcMidnight() / 1000));
      expect(ok.headers['ratelimit-policy']).toBe('"minute";q=100;w=60, "day";q=5;w=86400');
    }
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expectError(res, 429, 'rate_limit_exceeded');
    expect(Math.abs(Number(res.headers['retry-after']) - (nextUtcMidnight() - Date.now()) / 1000)).toBeLessThanOrEqual(
      1,
    );
    expect(String(res.headers.ratelimit)).toContain('"minute";r=95;');
  });

  it('bans a key that keeps going after 429, then answers api_key_banned, reporting the ban beside the true windows', async () => {
    const gw = await gateway({ BAN_THRESHOLD: '2', BAN_GRACE_MS: '0', BAN_SECONDS: '600' });
    const { key } = await addKey(gw.deps, 'enterprise', { perMinute: 1, perDay: 50 });
    expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode).toBe(200);
    for (let i = 0; i < 2; i++) {
      expectError(await gw.app.inject({ url: '/v1/pets', headers: bearer(key) }), 429, 'rate_limit_exceeded');
    }
    const banned = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expectError(banned, 429, 'api_key_banned');
    const retryAfter = Number(banned.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(590);
    expect(retryAfter).toBeLessThanOrEqual(600);
    expectRateLimitHeaders(banned.headers, 1, 0);
    expect(Number(banned.headers['x-ratelimit-reset'])).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000) + 590);
    // The windows as they stand (the day has 49 left), and the ban as an item of its own.
    expect(banned.headers.ratelimit).toMatch(/^"minute";r=0;t=(59|60), "day";r=49;t=\d+, "ban";r=0;t=(59\d|600)$/);
    expect(banned.headers['ratelimit-policy']).toBe('"minute";q=1;w=60, "day";q=50;w=86400, "ban";q=0;w=600');
  });

  it.each([
    ['embedded', { redisUrl: null }],
    ['Redis', {}],
  ])('never bans 50 workers sharing a key that each honour the Retry-After of their one 429 (%s)', async (_l, o) => {
    const gw = await gateways.start(o);
    const { id, key } = await addKey(gw.deps, 'enterprise', { perMinute: 20, perDay: 1_000 });
    const workers = await politeWorkers(50, async () => {
      const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
      return { status: res.statusCode, code: res.json().code };
    });
    const answers = workers.flat();
    expect(answers.filter((a) => a.status === 200)).toHaveLength(20);
    // Each worker got exactly one 429, and none of them said banned.
    expect(workers.map((w) => w.filter((a) => a.status === 429).length)).toEqual(Array(50).fill(1));
    expect(answers.filter((a) => a.code === 'api_key_banned')).toHaveLength(0);
    // Each 429 counts while its Retry-After runs: one per worker.
    const usage = await gw.admin.inject({ url: `/admin/keys/${id}/usage`, headers: bearer(ADMIN_TOKEN) });
    expect(usage.json()).toMatchObject({ ban: null, refusals: 50 });
  });

  it.each([
    ['embedded', { redisUrl: null }],
    ['Redis', {}],
  ])('bans a client that keeps sending for 2 s after its 429 (%s)', async (_l, o) => {
    const gw = await gateways.start(o);
    const { key } = await addKey(gw.deps, 'enterprise', { perMinute: 20, perDay: 1_000 });
    const answers = await impatientClient(2_000, async () => {
      const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
      return { status: res.statusCode, code: res.json().code };
    });
    expect(answers.at(-1)?.code).toBe('api_key_banned');
  });

  it('does not count public routes or put limits on them', async () => {
    const gw = await gateway();
    for (const url of ['/healthz', '/readyz']) {
      const res = await gw.app.inject({ url });
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBeUndefined();
    }
  });
});

describe('when Redis is unreachable', () => {
  async function deadRedisGateway(mode: 'open' | 'closed') {
    const { RedisProcess } = await import('@animal-store/tests/support/redis.js');
    const own = await RedisProcess.start();
    const gw = await gateways.start({ redisUrl: own.url, env: { RATE_LIMIT_FAILURE_MODE: mode } });
    await own.kill();
    return gw;
  }

  it('serves from the per-replica fallback in open mode and counts it', async () => {
    const gw = await deadRedisGateway('open');
    const { key } = await addKey(gw.deps, 'free');
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expect(res.statusCode).toBe(200);
    expectRateLimitHeaders(res.headers, 60, 59);
    const metrics = await gw.deps.registry.metrics();
    expect(metrics).toMatch(/gateway_rate_limit_decisions_total\{decision="admitted",source="fallback"[^}]*\} 1/);
    expect(metrics).toMatch(/gateway_redis_errors_total\{[^}]*\} 1/);
    expect((await gw.app.inject({ url: '/readyz' })).statusCode).toBe(200);
  });

  it('keeps readiness with keys in that Redis: the keys a replica has cached still answer', async () => {
    const { RedisProcess } = await import('@animal-store/tests/support/redis.js');
    const own = await RedisProcess.start();
    const gw = await gateways.start({ redisUrl: own.url, keysInRedis: true });
    expect(gw.deps.keyStore.kind).toBe('redis');
    const { key } = await addKey(gw.deps, 'free');
    expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode).toBe(200);
    await own.kill();
    // Every replica shares this Redis: leaving rotation would make a degraded limiter an outage.
    expect((await gw.app.inject({ url: '/readyz' })).statusCode).toBe(200);
    expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode).toBe(200);
  });

  it('answers 503 rate_limiter_unavailable in closed mode, with the plan minute limit and Retry-After', async () => {
    const gw = await deadRedisGateway('closed');
    const { key } = await addKey(gw.deps, 'pro');
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expectError(res, 503, 'rate_limiter_unavailable');
    expect(res.json().message).toBe('Rate limiting is unavailable; retry shortly');
    const retryAfter = Number(res.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expectRateLimitHeaders(res.headers, 300, 0);
    const reset = Number(res.headers['x-ratelimit-reset']);
    expect(Math.abs(reset - (Math.ceil(Date.now() / 1000) + retryAfter))).toBeLessThanOrEqual(1);
  });
});
