import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it, vi } from 'vitest';
import { expectError } from '../support/admin.js';
import { startGateway, type TestGateway, useGateways } from '../support/helpers.js';
import { adminPost, linkPath } from './support.js';

/*
 * The portal listener protects itself: a per-address limit on every request and a tighter one on
 * the sign-in link, shared by the replicas through Redis, the address as TRUST_PROXY decides it;
 * and load shedding. Each refusal is observed as a client sees it: status, Error body, headers.
 */

const gateways = useGateways();

async function link(gw: TestGateway): Promise<string> {
  const { id } = await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro' });
  return linkPath((await adminPost(gw, `/admin/customers/${id}/portal-sessions`)).url as string);
}

/** A guess at a sign-in link: as long as a real one, never issued. */
const guess = (n: number) => `/portal/enter?token=${String(n).padStart(43, 'x')}`;

function expectLimited(res: LightMyRequestResponse, window: string, perMinute: number): void {
  expectError(res, 429, 'rate_limit_exceeded');
  const retryAfter = Number(res.headers['retry-after']);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
  expect(res.headers['ratelimit-policy']).toBe(`"${window}";q=${perMinute};w=60`);
  expect(res.headers.ratelimit).toBe(`"${window}";r=0;t=${retryAfter}`);
  expect(res.headers['set-cookie']).toBeUndefined();
}

describe('the sign-in link’s per-address limit', () => {
  it('refuses an address past PORTAL_SIGN_IN_PER_MINUTE visits with 429, a real link too, and no other address', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ env: { PORTAL_SIGN_IN_PER_MINUTE: '3' }, logs });
    const real = await link(gw);
    // However the path is spelt, the sign-in route is the one counted.
    for (const url of [guess(0), guess(1).replace('enter', '%65nter'), guess(2)]) {
      expect((await gw.portal.inject({ url })).statusCode).toBe(404);
    }
    // The fourth visit is refused before the store is asked: the real link is not used up by it.
    expectLimited(await gw.portal.inject({ url: real }), 'portal-sign-in', 3);
    expectLimited(await gw.portal.inject({ url: guess(4) }), 'portal-sign-in', 3);
    // One warning when the address crossed the limit, not one per refusal.
    expect(logs.filter((l) => l.audit === 'portal.limited')).toEqual([
      expect.objectContaining({ window: 'portal-sign-in' }),
    ]);
    // The page itself is still served to that address: only sign-in is spent.
    expect((await gw.portal.inject({ url: '/portal' })).statusCode).toBe(200);
    const elsewhere = await gw.portal.inject({ url: real, remoteAddress: '198.51.100.7' });
    expect(elsewhere.statusCode).toBe(303);
  });

  it('is shared by the replicas through Redis: two gateways on one prefix give an address one budget', async () => {
    const env = { PORTAL_SIGN_IN_PER_MINUTE: '4' };
    const a = await gateways.start({ env });
    const b = await gateways.start({ env, prefix: a.config.redisPrefix });
    for (const gw of [a, b, a, b]) expect((await gw.portal.inject({ url: guess(1) })).statusCode).toBe(404);
    expectLimited(await a.portal.inject({ url: guess(2) }), 'portal-sign-in', 4);
    expectLimited(await b.portal.inject({ url: guess(3) }), 'portal-sign-in', 4);
  });

  it('holds in memory too, for a gateway without Redis', async () => {
    const gw = await startGateway({ env: { PORTAL_SIGN_IN_PER_MINUTE: '2' } });
    try {
      const visits = await Promise.all([1, 2, 3, 4].map((n) => gw.portal.inject({ url: guess(n) })));
      expect(visits.map((v) => v.statusCode).sort()).toEqual([404, 404, 429, 429]);
    } finally {
      await gw.close();
    }
  });
});

describe('the portal’s per-address limit on every request', () => {
  it('answers 429 past PORTAL_PER_MINUTE from one address, counting the sign-in link and the API alike', async () => {
    const gw = await gateways.start({ env: { PORTAL_PER_MINUTE: '5' } });
    const answers = [];
    for (const url of ['/portal', '/portal/style.css', '/portal/api/session', guess(1), '/portal/portal.js']) {
      answers.push((await gw.portal.inject({ url })).statusCode);
    }
    expect(answers).toEqual([200, 200, 401, 404, 200]);
    expectLimited(await gw.portal.inject({ url: '/portal' }), 'portal', 5);
    expectLimited(await gw.portal.inject({ url: await link(gw) }), 'portal', 5);
    expect((await gw.portal.inject({ url: '/portal', remoteAddress: '203.0.113.9' })).statusCode).toBe(200);
  });

  it('takes X-Forwarded-For only from proxies TRUST_PROXY names: a client cannot claim a fresh address', async () => {
    const spoofed = (gw: TestGateway, n: number) =>
      gw.portal.inject({ url: '/portal', headers: { 'x-forwarded-for': `192.0.2.${n}` } });
    // No TRUST_PROXY: every request is the peer's (127.0.0.1), whatever it says it forwards.
    const direct = await gateways.start({ env: { PORTAL_PER_MINUTE: '2' } });
    expect([(await spoofed(direct, 1)).statusCode, (await spoofed(direct, 2)).statusCode]).toEqual([200, 200]);
    expectLimited(await spoofed(direct, 3), 'portal', 2);
    // Behind a trusted proxy (loopback here) each forwarded client has its own budget.
    const proxied = await gateways.start({ env: { PORTAL_PER_MINUTE: '2', TRUST_PROXY: 'loopback' } });
    for (let n = 1; n <= 3; n++) expect((await spoofed(proxied, n)).statusCode).toBe(200);
    expect((await spoofed(proxied, 1)).statusCode).toBe(200);
    expectLimited(await spoofed(proxied, 1), 'portal', 2);
  });
});

describe('load shedding on the portal listener', () => {
  it('answers 503 overloaded in the Error shape with Retry-After, before any limit or session work', async () => {
    // A heap threshold every process is past: the portal sheds from its first load sample on.
    const gw = await gateways.start({ env: { OVERLOAD_HEAP_USED_MB: '1', PORTAL_PER_MINUTE: '1' } });
    await vi.waitFor(async () => expect((await gw.portal.inject({ url: '/portal' })).statusCode).toBe(503), {
      timeout: 3_000,
      interval: 50,
    });
    for (const url of ['/portal', guess(1), '/portal/api/session']) {
      const res = await gw.portal.inject({ url });
      expectError(res, 503, 'overloaded');
      expect(res.headers['retry-after']).toBe('2');
    }
  });
});
