import { afterEach, describe, expect, it } from 'vitest';
import { addKey, bearer, startEchoUpstream, startGateway, type TestGateway } from '../support/helpers.js';

const APP = 'https://app.animal-store.test';
const OTHER = 'https://evil.example';

const open: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of open.splice(0).reverse()) await close();
});

/** A gateway (embedded limiter) in front of an echo upstream, with `env` on top. */
async function gateway(env: Record<string, string> = {}): Promise<TestGateway> {
  const upstream = await startEchoUpstream();
  open.push(upstream.close);
  const gw = await startGateway({ upstream: upstream.url, env: { ANON_PER_MINUTE: '3', ...env } });
  open.push(() => gw.close());
  return gw;
}

function preflight(gw: TestGateway, origin: string, url = '/v1/pets') {
  return gw.app.inject({
    method: 'OPTIONS',
    url,
    headers: {
      origin,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization, content-type',
    },
  });
}

function corsHeaders(headers: Record<string, unknown>): string[] {
  return Object.keys(headers).filter((name) => name.startsWith('access-control-'));
}

const EXPOSED = [
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'RateLimit',
  'RateLimit-Policy',
  'Retry-After',
];

function expectExposed(res: { headers: Record<string, unknown> }) {
  expect(res.headers['access-control-allow-origin']).toBe(APP);
  expect(String(res.headers.vary)).toMatch(/\bOrigin\b/);
  const exposed = String(res.headers['access-control-expose-headers']).split(/,\s*/);
  expect(exposed).toEqual(expect.arrayContaining(EXPOSED));
}

describe('CORS with CORS_ORIGINS', () => {
  it('answers a preflight from an allowed origin with 204, the methods, headers and max-age, without a key or a charge', async () => {
    const gw = await gateway({ CORS_ORIGINS: `${APP}, http://localhost:5173` });
    const { key } = await addKey(gw.deps, 'enterprise', { perMinute: 2, perDay: 100 });
    for (let i = 0; i < 5; i++) {
      const res = await preflight(gw, APP);
      expect(res.statusCode, res.body).toBe(204);
      expect(res.body).toBe('');
      expect(res.headers['access-control-allow-origin']).toBe(APP);
      expect(String(res.headers['access-control-allow-methods']).split(/,\s*/)).toEqual(['GET', 'POST']);
      expect(String(res.headers['access-control-allow-headers']).toLowerCase().split(/,\s*/)).toEqual(
        expect.arrayContaining(['authorization', 'content-type']),
      );
      expect(Number(res.headers['access-control-max-age'])).toBeGreaterThan(0);
      expect(String(res.headers.vary)).toMatch(/\bOrigin\b/);
      expect(res.headers['x-ratelimit-limit']).toBeUndefined();
    }
    expect((await preflight(gw, 'http://localhost:5173', '/v1/pets/1')).statusCode).toBe(204);
    // Six preflights later, neither the key's minute nor the address's has been touched.
    const keyed = await gw.app.inject({ url: '/v1/pets', headers: { ...bearer(key), origin: APP } });
    expect(keyed.statusCode).toBe(200);
    expect(keyed.headers['x-ratelimit-remaining']).toBe('1');
    const anonymous = await gw.app.inject({ url: '/v1/pets', headers: { origin: APP } });
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.headers['x-ratelimit-remaining']).toBe('2');
  });

  it('lets an allowed origin read the rate-limit headers on answers and on 401 and 429 refusals', async () => {
    const gw = await gateway({ CORS_ORIGINS: APP });
    const { key } = await addKey(gw.deps, 'enterprise', { perMinute: 1, perDay: 100 });
    const ok = await gw.app.inject({ url: '/v1/pets', headers: { ...bearer(key), origin: APP } });
    expect(ok.statusCode).toBe(200);
    expectExposed(ok);
    const limited = await gw.app.inject({ url: '/v1/pets', headers: { ...bearer(key), origin: APP } });
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toMatchObject({ code: 'rate_limit_exceeded', status: 429 });
    expect(limited.headers['retry-after']).toBeDefined();
    expectExposed(limited);
    const unauthorized = await gw.app.inject({ url: '/v1/pets', headers: { origin: APP } });
    expect(unauthorized.statusCode).toBe(401);
    expect(unauthorized.json()).toMatchObject({ code: 'missing_api_key', status: 401 });
    expectExposed(unauthorized);
  });

  it('gives an origin not on the list no CORS header: its preflight is the usual 405 and its answers are as before', async () => {
    const gw = await gateway({ CORS_ORIGINS: APP });
    const { key } = await addKey(gw.deps, 'pro');
    const res = await preflight(gw, OTHER);
    expect(res.statusCode).toBe(405);
    expect(res.json()).toMatchObject({ code: 'method_not_allowed', status: 405 });
    expect(corsHeaders(res.headers)).toEqual([]);
    const answer = await gw.app.inject({ url: '/v1/pets', headers: { ...bearer(key), origin: OTHER } });
    expect(answer.statusCode).toBe(200);
    expect(corsHeaders(answer.headers)).toEqual([]);
    // Still kept apart from the allowed origin's answers by caches.
    expect(String(answer.headers.vary)).toMatch(/\bOrigin\b/);
    // An OPTIONS that is not a preflight is no CORS request either.
    const plain = await gw.app.inject({ method: 'OPTIONS', url: '/v1/pets', headers: { origin: APP } });
    expect(plain.statusCode).toBe(405);
    expect(corsHeaders(plain.headers)).toEqual(['access-control-allow-origin', 'access-control-expose-headers']);
  });

  it('is off without CORS_ORIGINS: a preflight gets the 405 and no answer carries a CORS header', async () => {
    const gw = await gateway();
    const { key } = await addKey(gw.deps, 'pro');
    const res = await preflight(gw, APP);
    expect(res.statusCode).toBe(405);
    expect(corsHeaders(res.headers)).toEqual([]);
    const answer = await gw.app.inject({ url: '/v1/pets', headers: { ...bearer(key), origin: APP } });
    expect(corsHeaders(answer.headers)).toEqual([]);
  });
});
