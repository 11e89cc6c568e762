import { describe, expect, it } from 'vitest';
import { generateApiKey, hashApiKey } from '../src/keys/api-key.js';
import { KeyResolver } from '../src/keys/key-resolver.js';
import type { KeyRecord, KeyStore } from '../src/keys/key-store.js';
import { MemoryKeyStore } from '../src/keys/memory-key-store.js';
import { addKey, bearer, type TestGateway, useGateways } from './helpers.js';

const gateways = useGateways();

function gateway(options: { env?: Record<string, string>; keyStore?: KeyStore } = {}): Promise<TestGateway> {
  return gateways.start(options);
}

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

describe('well-formed keys nobody issued', () => {
  it('stop reaching the key store once their sender is over the per-address limit', async () => {
    const gw = await gateway({ env: { ANON_PER_MINUTE: '3' } });
    const codes: string[] = [];
    for (let i = 0; i < 12; i++) {
      const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(generateApiKey()) });
      codes.push((res.json() as { code: string }).code);
    }
    expect(codes.slice(0, 3)).toEqual(['invalid_api_key', 'invalid_api_key', 'invalid_api_key']);
    expect(codes.slice(3).every((c) => c === 'rate_limit_exceeded')).toBe(true);
    // Three lookups answered 401, the fourth found the sender over its limit; no more after that.
    expect(storeLookups((await gw.app.inject({ url: '/metrics' })).body)).toBe(4);
  });

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
    expect((await resolver.resolve(key))?.id).toBe('key_known');
    for (let i = 0; i < 50; i++) expect(await resolver.resolve(generateApiKey())).toBeNull();
    const before = lookups;
    expect(resolver.cached(hashApiKey(key))?.id).toBe('key_known');
    expect((await resolver.resolve(key))?.id).toBe('key_known');
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
    const gw = await gateway({ keyStore: flaky });
    const { key } = await addKey(gw.deps, 'free');
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ code: 'upstream_unavailable', message: expect.any(String), status: 503 });
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(res.headers['x-ratelimit-remaining']).toBe('0');
    expect(res.headers['x-ratelimit-limit']).toBe('60');
    expect(res.headers.ratelimit).toMatch(/^"anonymous";r=0;t=\d+$/);
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
