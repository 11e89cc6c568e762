import { metricValue } from '@animal-store/tests/support/service-process.js';
import { describe, expect, it } from 'vitest';
import { generateApiKey, hashApiKey } from '../../src/keys/api-key.js';
import { KeyResolver } from '../../src/keys/key-resolver.js';
import type { KeyRecord, KeyStore } from '../../src/keys/key-store.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import { addKey, bearer, type TestGateway, useGateways } from '../support/helpers.js';

const gateways = useGateways();

function gateway(
  options: {
    env?: Record<string, string>;
    keyStore?: KeyStore;
    redisUrl?: null;
    logs?: Record<string, unknown>[];
  } = {},
): Promise<TestGateway> {
  return gateways.start(options);
}

type Echo = { headers: Record<string, string | undefined> };

function storeLookups(metrics: string): number {
  const match = /gateway_key_store_duration_seconds_count\{[^}]*operation="findByHash"[^}]*\} (\d+)/.exec(metrics);
  return match ? Number(match[1]) : 0;
}

describe('hop-by-hop request headers', () => {
  it.each([
    ['Expect: 100-continue', { expect: '100-continue' }],
    ['Keep-Alive', { 'keep-alive': 'timeout=5' }],
    ['Upgrade', { upgrade: 'h2c' }],
    ['TE', { te: 'trailers' }],
  ])('are not forwarded, so a request carrying %s is proxied, not answered 502', async (_label, extra) => {
    const gw = await gateway();
    const { key } = await addKey(gw.deps, 'pro');
    const res = await gw.app.inject({
      method: 'POST',
      url: '/v1/pets',
      headers: { ...bearer(key), 'content-type': 'application/json', ...extra },
      payload: { name: 'Rex', categoryId: 1 },
    });
    expect(res.statusCode).toBe(200);
    const seen = res.json() as { headers: Record<string, string> };
    for (const name of Object.keys(extra)) expect(seen.headers[name]).toBeUndefined();
  });
});

describe('keys from an address over its per-address limit', () => {
  it.each([
    ['garbage (no key shape)', (i: number) => `ask_garbage${i}`],
    ['well-formed keys nobody issued', () => generateApiKey()],
  ])('a valid key never used before is served after 70 of %s', async (_label, garbage) => {
    const gw = await gateway();
    const codes: string[] = [];
    for (let i = 0; i < 70; i++) {
      codes.push((await gw.app.inject({ url: '/v1/pets', headers: bearer(garbage(i)) })).json().code);
    }
    expect(codes.slice(-10)).toEqual(Array(10).fill('rate_limit_exceeded'));
    const { key } = await addKey(gw.deps, 'pro');
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['x-ratelimit-limit']).toBe('300');
    // The sender is still over its limit for everything without a valid key.
    const after = await gw.app.inject({ url: '/v1/pets', headers: bearer(generateApiKey()) });
    expect(after.json().code).toBe('rate_limit_exceeded');
  });

  it('cost one key-store lookup per distinct well-formed key, none for repeats or garbage', async () => {
    const gw = await gateway({ env: { ANON_PER_MINUTE: '3' } });
    const codes: string[] = [];
    const repeated = generateApiKey();
    const send = async (key: string) =>
      codes.push((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).json().code);
    for (let i = 0; i < 12; i++) await send(generateApiKey());
    for (let i = 0; i < 5; i++) await send(repeated);
    for (let i = 0; i < 5; i++) await send(`ask_garbage${i}`);
    expect(codes.slice(0, 3)).toEqual(['invalid_api_key', 'invalid_api_key', 'invalid_api_key']);
    expect(codes.slice(3).every((c) => c === 'rate_limit_exceeded')).toBe(true);
    // Each well-formed key is looked up before it is refused: 12 + 1, whatever the address's state.
    expect(storeLookups(await gw.deps.registry.metrics())).toBe(13);
  });
});

describe('well-formed keys nobody issued', () => {
  it('do not push known keys out of the cache', async () => {
    const store = new MemoryKeyStore();
    let lookups = 0;
    const counting: KeyStore = Object.assign(Object.create(store), {
      findByHash: (sha256: string) => {
        lookups++;
        return store.findByHash(sha256);
      },
    });
    const key = generateApiKey();
    const record: KeyRecord = {
      id: 'key_known',
      name: 'known',
      plan: 'pro',
      sha256: hashApiKey(key),
      createdAt: new Date().toISOString(),
    };
    await store.insert(record);
    const resolver = new KeyResolver(counting, [], { maxEntries: 5, positiveTtlMs: 60_000, negativeTtlMs: 60_000 });
    // As the gate asks: the cache first, the store only when the cache cannot tell.
    const resolve = (presented: string) => {
      const sha256 = hashApiKey(presented);
      const cached = resolver.cached(sha256);
      return cached === undefined ? resolver.fetch(sha256) : Promise.resolve(cached);
    };
    expect((await resolve(key))?.record.id).toBe('key_known');
    for (let i = 0; i < 50; i++) expect(await resolve(generateApiKey())).toBeNull();
    const before = lookups;
    expect(resolver.cached(hashApiKey(key))?.record.id).toBe('key_known');
    expect((await resolve(key))?.record.id).toBe('key_known');
    expect(lookups).toBe(before);
  });
});

describe('when the key store fails', () => {
  it('answers 503 upstream_unavailable with rate-limit headers, and serves again when it is back', async () => {
    const store = new MemoryKeyStore();
    let down = true;
    const flaky: KeyStore = Object.assign(Object.create(store), {
      findByHash: (sha256: string) =>
        down ? Promise.reject(new Error('connection refused')) : store.findByHash(sha256),
    });
    const logs: Record<string, unknown>[] = [];
    const gw = await gateway({ keyStore: flaky, logs });
    const { key } = await addKey(gw.deps, 'free');
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({
      code: 'upstream_unavailable',
      message: 'Cannot verify API keys right now; retry shortly',
      status: 503,
    });
    // Operators hear of it: one error line with the store's error, and the lookup counted as failed.
    const errors = logs.filter((l) => l.level === 50);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ msg: 'key store unavailable', err: { message: 'connection refused' } });
    expect(
      metricValue(await gw.deps.registry.metrics(), 'gateway_key_store_duration_seconds_count', { outcome: 'error' }),
    ).toBe(1);
    // Exhausted until the retry it announces.
    expect(res.headers['retry-after']).toBe('5');
    expect(res.headers['x-ratelimit-remaining']).toBe('0');
    expect(res.headers['x-ratelimit-limit']).toBe('60');
    expect(res.headers.ratelimit).toBe('"anonymous";r=0;t=5');
    down = false;
    expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode).toBe(200);
  });

  it('fails only the request, not the process, for a record it cannot use', async () => {
    const gw = await gateway();
    const key = generateApiKey();
    // An enterprise record without limits, as a hand-edited database document could be.
    await gw.deps.keyStore.insert({
      id: 'key_broken',
      name: 'broken',
      plan: 'enterprise',
      sha256: hashApiKey(key),
      createdAt: new Date().toISOString(),
    });
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ code: 'internal_error', message: 'Internal server error', status: 500 });
    const { key: good } = await addKey(gw.deps, 'pro');
    expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(good) })).statusCode).toBe(200);
  });
});

describe('what the client says about itself does not reach pets', () => {
  const claims = {
    'x-forwarded-for': '203.0.113.66',
    forwarded: 'for=203.0.113.66;proto=https',
    'x-real-ip': '203.0.113.66',
    'proxy-authorization': 'Basic dXNlcjpwYXNz',
    cookie: 'session=stolen',
    'x-forwarded-host': 'evil.example',
    'x-forwarded-proto': 'https',
  };
  const cases: { name: string; env: Record<string, string>; expected: string }[] = [
    { name: 'a direct client', env: {}, expected: '198.51.100.20' },
    // Behind a trusted proxy the gateway resolves the client from X-Forwarded-For; pets gets that one address.
    { name: 'a client behind a trusted proxy', env: { TRUST_PROXY: '198.51.100.20' }, expected: '203.0.113.66' },
  ];
  it.each(cases)('$name: pets sees only X-Forwarded-For = $expected', async ({ env, expected }) => {
    const gw = await gateway({ env });
    const { key } = await addKey(gw.deps, 'pro');
    const res = await gw.app.inject({
      url: '/v1/pets',
      remoteAddress: '198.51.100.20',
      headers: { ...bearer(key), ...claims },
    });
    expect(res.statusCode).toBe(200);
    const seen = (res.json() as Echo).headers;
    expect(seen['x-forwarded-for']).toBe(expected);
    for (const name of [
      'forwarded',
      'x-real-ip',
      'proxy-authorization',
      'cookie',
      'x-forwarded-host',
      'x-forwarded-proto',
    ]) {
      expect(seen[name], name).toBeUndefined();
    }
    expect(seen.authorization).toBeUndefined();
  });
});

describe('X-Content-Type-Options and Cache-Control', () => {
  const cases = [
    { name: 'a proxied 200', url: '/v1/pets', keyed: true, status: 200, noStore: true },
    { name: 'a proxied upstream 404', url: '/v1/pets/404', keyed: true, status: 404, noStore: true },
    { name: 'a 401 without a key', url: '/v1/pets', keyed: false, status: 401, noStore: true },
    { name: "the gateway's own 404 under /v1", url: '/v1/nowhere', keyed: true, status: 404, noStore: true },
    { name: 'a 405', url: '/v1/pets/1', method: 'DELETE' as const, keyed: true, status: 405, noStore: true },
    { name: 'a 400 for a URL that does not decode', url: '/v1/pets/%zz', keyed: true, status: 400, noStore: false },
    { name: 'the health check', url: '/healthz', keyed: false, status: 200, noStore: false },
    { name: 'a missing docs asset', url: '/docs/static/nope.js', keyed: false, status: 404, noStore: false },
  ];
  it.each(cases)('$name ($status) carries nosniff', async ({ url, method, keyed, status, noStore }) => {
    const gw = await gateway();
    const { key } = await addKey(gw.deps, 'pro');
    const res = await gw.app.inject({ url, method: method ?? 'GET', headers: keyed ? bearer(key) : {} });
    expect(res.statusCode, res.body).toBe(status);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    if (noStore) expect(res.headers['cache-control']).toBe('no-store');
  });

  it('the 429 for an address over its limit carries both', async () => {
    const gw = await gateway({ env: { ANON_PER_MINUTE: '1' } });
    await gw.app.inject({ url: '/v1/pets' });
    const res = await gw.app.inject({ url: '/v1/pets' });
    expect(res.statusCode).toBe(429);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['cache-control']).toBe('no-store');
  });
});

describe('W3C trace context', () => {
  const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
  const cases = [
    {
      name: 'a valid traceparent is continued: same trace, the gateway as parent, tracestate kept',
      headers: { traceparent: `00-${TRACE}-00f067aa0ba902b7-01`, tracestate: 'vendor=abc' },
      continued: true,
    },
    {
      name: 'no traceparent: one is started, with no tracestate',
      headers: { tracestate: 'vendor=abc' },
      continued: false,
    },
    {
      name: 'an all-zero trace id is invalid: a new trace is started',
      headers: { traceparent: `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`, tracestate: 'vendor=abc' },
      continued: false,
    },
    {
      name: 'garbage is invalid: a new trace is started',
      headers: { traceparent: 'not-a-trace', tracestate: 'vendor=abc' },
      continued: false,
    },
  ];
  it.each(cases)('$name; the access line names the trace pets got', async ({ headers, continued }) => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateway({ logs });
    const { key } = await addKey(gw.deps, 'pro');
    const res = await gw.app.inject({ url: '/v1/pets', headers: { ...bearer(key), ...headers } });
    expect(res.statusCode).toBe(200);
    const seen = (res.json() as Echo).headers;
    const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(seen.traceparent ?? '');
    expect(match, seen.traceparent).not.toBeNull();
    const [, traceId, parentId, flags] = match as RegExpExecArray;
    expect(parentId).not.toBe('00f067aa0ba902b7');
    expect(parentId).not.toBe('0'.repeat(16));
    if (continued) {
      expect(traceId).toBe(TRACE);
      expect(flags).toBe('01');
      expect(seen.tracestate).toBe('vendor=abc');
    } else {
      expect(traceId).not.toBe(TRACE);
      expect(traceId).not.toBe('0'.repeat(32));
      expect(seen.tracestate).toBeUndefined();
    }
    const access = logs.filter((l) => l.msg === 'request');
    expect(access).toHaveLength(1);
    expect(access[0]?.traceId).toBe(traceId);
  });
});

describe('the access line', () => {
  it('is the one line per request at info: method, path without query, status, ms, ids, limiter', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateway({ logs });
    const { id, key } = await addKey(gw.deps, 'pro');
    const before = logs.length;
    const res = await gw.app.inject({ url: '/v1/pets?limit=5&token=s3cr3t-query-value', headers: bearer(key) });
    expect(res.statusCode).toBe(200);
    const lines = logs.slice(before);
    expect(lines.map((l) => l.msg)).toEqual(['request']);
    expect(lines[0]).toMatchObject({
      level: 30,
      service: 'gateway',
      method: 'GET',
      path: '/v1/pets',
      status: 200,
      reqId: res.headers['x-request-id'],
      keyId: id,
      limiter: 'admitted',
      limiterSource: 'shared',
      traceId: expect.stringMatching(/^[0-9a-f]{32}$/),
    });
    expect(typeof lines[0]?.ms).toBe('number');
    const text = JSON.stringify(lines);
    expect(text).not.toContain('s3cr3t');
    expect(text).not.toContain(key);
  });

  const refusals = [
    { name: 'no key', headers: {}, status: 401, limiter: 'admitted', limiterSource: 'address' },
    { name: 'a bad URL', url: '/v1/pets/%zz', headers: {}, status: 400, limiter: 'admitted', limiterSource: 'address' },
  ];
  it.each(refusals)('$name → one line, $status, limiter $limiter from $limiterSource', async (c) => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateway({ logs });
    const before = logs.length;
    const res = await gw.app.inject({ url: c.url ?? '/v1/pets', headers: c.headers });
    expect(res.statusCode).toBe(c.status);
    const lines = logs.slice(before).filter((l) => (l.level as number) >= 30);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      msg: 'request',
      status: c.status,
      limiter: c.limiter,
      limiterSource: c.limiterSource,
    });
  });

  it('on the admin listener, never logs the query string (?token=)', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateway({ logs });
    const before = logs.length;
    const res = await gw.admin.inject({ url: '/admin/keys?token=s3cr3t-admin-token' });
    expect(res.statusCode).toBe(401);
    const lines = logs.slice(before);
    expect(lines.filter((l) => l.msg === 'request')).toEqual([
      expect.objectContaining({ service: 'gateway-admin', path: '/admin/keys', status: 401 }),
    ]);
    expect(JSON.stringify(lines)).not.toContain('s3cr3t');
  });
});

describe('what operators see in the metrics', () => {
  it('labels requests with the route template, never the /v1/* wildcard', async () => {
    const gw = await gateway();
    const { key } = await addKey(gw.deps, 'pro');
    for (const url of ['/v1/pets', '/v1/pets?limit=3', '/v1/pets/7', '/v1/pets/8']) {
      expect((await gw.app.inject({ url, headers: bearer(key) })).statusCode).toBe(200);
    }
    const metrics = await gw.deps.registry.metrics();
    expect(metricValue(metrics, 'http_requests_total', { route: '/v1/pets', method: 'GET', status: '200' })).toBe(2);
    expect(
      metricValue(metrics, 'http_requests_total', { route: '/v1/pets/:petId', method: 'GET', status: '200' }),
    ).toBe(2);
    expect(metrics).not.toContain('route="/v1/*"');
  });

  it.each([
    { mode: 'embedded (no Redis)', redisUrl: null, source: 'memory' },
    { mode: 'Redis', redisUrl: undefined, source: 'shared' },
  ])('names the limiter source $source in $mode mode', async ({ redisUrl, source }) => {
    const gw = await gateway(redisUrl === null ? { redisUrl } : {});
    const { key } = await addKey(gw.deps, 'pro');
    expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode).toBe(200);
    const metrics = await gw.deps.registry.metrics();
    expect(metricValue(metrics, 'gateway_rate_limit_decisions_total', { decision: 'admitted', source })).toBe(1);
    expect(metricValue(metrics, 'gateway_rate_limit_decisions_total', { decision: 'admitted' })).toBe(1);
  });

  it.each([
    { mode: 'embedded (no Redis)', redisUrl: null },
    { mode: 'Redis', redisUrl: undefined },
  ])('counts a ban once, when it starts, and logs one warn line for it ($mode)', async ({ redisUrl }) => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateway({
      env: { BAN_THRESHOLD: '2', BAN_GRACE_MS: '0', BAN_SECONDS: '600' },
      logs,
      ...(redisUrl === null ? { redisUrl } : {}),
    });
    const { id, key } = await addKey(gw.deps, 'enterprise', { perMinute: 1, perDay: 100 });
    const statuses: string[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
      statuses.push(`${res.statusCode} ${res.statusCode === 200 ? '' : (res.json() as { code: string }).code}`.trim());
    }
    // One admitted, two refused (the threshold), the third refusal starts the ban.
    expect(statuses).toEqual([
      '200',
      '429 rate_limit_exceeded',
      '429 rate_limit_exceeded',
      '429 api_key_banned',
      '429 api_key_banned',
      '429 api_key_banned',
    ]);
    expect(metricValue(await gw.deps.registry.metrics(), 'gateway_bans_total')).toBe(1);
    const warnings = logs.filter((l) => l.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ keyId: id, refusals: 3, msg: expect.stringContaining('banned') });
    const endsIn = Date.parse(String(warnings[0]?.banEndsAt)) - Date.now();
    expect(endsIn).toBeGreaterThan(590_000);
    expect(endsIn).toBeLessThanOrEqual(600_000);
  });
});
