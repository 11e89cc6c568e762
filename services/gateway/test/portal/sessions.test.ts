import { describe, expect, it } from 'vitest';
import { LINK_TTL_MS } from '../../src/customers/portal-session-store.js';
import { SESSION_TTL_MS } from '../../src/portal/session-cookie.js';
import { expectError } from '../support/admin.js';
import { startGateway, type TestGateway, useGateways } from '../support/helpers.js';
import { admin, adminPost, linkPath, sessionCookie, signIn } from './support.js';

/*
 * Signing in to the portal: the admin API's one-time link, exchanged once for a session cookie;
 * links that are reused, expired or tampered with are refused; a session ends on sign-out and on
 * expiry; changes need the session's CSRF token; a store that is away is a 503.
 */

const gateways = useGateways();

async function customer(gw: TestGateway, name = 'Acme'): Promise<string> {
  return (await adminPost(gw, '/admin/customers', { name, plan: 'pro' })).id as string;
}

describe('POST /admin/customers/:id/portal-sessions', () => {
  it('answers 201 with a one-time URL on PORTAL_URL expiring in minutes; 404 for no customer', async () => {
    const now = Date.now();
    const gw = await gateways.start({ env: { PORTAL_URL: 'https://portal.example.com' } });
    const id = await customer(gw);
    const res = await gw.admin.inject({
      method: 'POST',
      url: `/admin/customers/${id}/portal-sessions`,
      headers: admin,
    });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(['expiresAt', 'url']);
    expect(body.url).toMatch(/^https:\/\/portal\.example\.com\/portal\/enter\?token=[\w-]{43}$/);
    const ttl = Date.parse(body.expiresAt) - now;
    expect(ttl).toBeGreaterThan(LINK_TTL_MS - 60_000);
    expect(ttl).toBeLessThanOrEqual(LINK_TTL_MS + 60_000);
    expectError(
      await gw.admin.inject({ method: 'POST', url: '/admin/customers/cus_nobody/portal-sessions', headers: admin }),
      404,
      'not_found',
    );
  });

  it('answers 503 store_unavailable while Redis is away', async () => {
    const gw = await gateways.start();
    const id = await customer(gw);
    gw.redis?.disconnect();
    const res = await gw.admin.inject({
      method: 'POST',
      url: `/admin/customers/${id}/portal-sessions`,
      headers: admin,
    });
    expectError(res, 503, 'store_unavailable');
    expect(res.headers['retry-after']).toBeDefined();
  });
});

describe('the sign-in link', () => {
  it('sets an HttpOnly, SameSite=Strict session cookie once, Secure behind TLS, and refuses the link again', async () => {
    const gw = await gateways.start();
    const id = await customer(gw);
    const { url } = await adminPost(gw, `/admin/customers/${id}/portal-sessions`);
    const entered = await gw.portal.inject({ url: linkPath(url as string) });
    expect(entered.statusCode).toBe(303);
    expect(entered.headers.location).toBe('/portal');
    const cookie = String(entered.headers['set-cookie']);
    expect(cookie).toMatch(/^portal_session=[\w-]{43}; Max-Age=3600; Path=\/portal; HttpOnly; SameSite=Strict$/);
    expect(SESSION_TTL_MS).toBe(3_600_000);
    const session = await gw.portal.inject({ url: '/portal/api/session', headers: { cookie: sessionCookie(entered) } });
    expect(session.json()).toMatchObject({
      customer: { id, name: 'Acme', plan: 'pro' },
      csrfToken: expect.any(String),
    });

    const again = await gw.portal.inject({ url: linkPath(url as string) });
    expect(again.statusCode).toBe(404);
    expect(again.headers['set-cookie']).toBeUndefined();

    // Behind a TLS-terminating proxy the cookie is Secure.
    const tls = await gateways.start({ env: { TRUST_PROXY: 'true' } });
    const other = await customer(tls);
    const link = await adminPost(tls, `/admin/customers/${other}/portal-sessions`);
    const secure = await tls.portal.inject({
      url: linkPath(link.url as string),
      headers: { 'x-forwarded-proto': 'https' },
    });
    expect(String(secure.headers['set-cookie'])).toMatch(/; HttpOnly; Secure; SameSite=Strict$/);
  });

  it('never reaches a log line, and leaves a portal.link-refused line when refused', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ logs });
    const id = await customer(gw);
    const { url } = await adminPost(gw, `/admin/customers/${id}/portal-sessions`);
    const secret = new URL(url as string).searchParams.get('token') as string;
    expect((await gw.portal.inject({ url: linkPath(url as string) })).statusCode).toBe(303);
    expect((await gw.portal.inject({ url: linkPath(url as string) })).statusCode).toBe(404);
    expect((await gw.portal.inject({ url: '/portal/enter' })).statusCode).toBe(404);
    expect(logs.some((l) => l.path === '/portal/enter' && l.status === 303)).toBe(true);
    expect(JSON.stringify(logs)).not.toContain(secret);
    expect(logs.filter((l) => l.audit === 'portal.link_refused')).toHaveLength(2);
    expect(logs.filter((l) => l.audit === 'portal.signed_in')).toEqual([expect.objectContaining({ customerId: id })]);
  });

  it('is refused tampered with, and gives one session to many visits at once', async () => {
    const gw = await gateways.start();
    const id = await customer(gw);
    const { url } = await adminPost(gw, `/admin/customers/${id}/portal-sessions`);
    const path = linkPath(url as string);
    const tampered = `${path.slice(0, -1)}${path.endsWith('A') ? 'B' : 'A'}`;
    expect((await gw.portal.inject({ url: tampered })).statusCode).toBe(404);
    const visits = await Promise.all(Array.from({ length: 10 }, () => gw.portal.inject({ url: path })));
    expect(visits.map((v) => v.statusCode).sort()).toEqual([303, ...Array(9).fill(404)]);
  });

  it('expires after its minutes, and a session after its hour (a clock the test moves)', async () => {
    let now = Date.now();
    const gw = await startGateway({ now: () => now });
    try {
      const id = await customer(gw);
      const late = await adminPost(gw, `/admin/customers/${id}/portal-sessions`);
      now += LINK_TTL_MS;
      expect((await gw.portal.inject({ url: linkPath(late.url as string) })).statusCode).toBe(404);

      // In use every ten minutes, a session lasts its hour, and not a millisecond more.
      const browser = await signIn(gw, id);
      for (let used = 0; used < 5; used++) {
        now += 10 * 60_000;
        expect((await browser.get('/portal/api/usage')).statusCode).toBe(200);
      }
      now += SESSION_TTL_MS - 50 * 60_000 - 1;
      expect((await browser.get('/portal/api/usage')).statusCode).toBe(200);
      now += 1;
      expectError(await browser.get('/portal/api/usage'), 401, 'unauthorized');
    } finally {
      await gw.close();
    }
  });

  it('ends a session left idle for PORTAL_SESSION_IDLE_MS (15 minutes unless set)', async () => {
    for (const [env, idleMs] of [
      [{}, 15 * 60_000] as const,
      [{ PORTAL_SESSION_IDLE_MS: '120000' }, 120_000] as const,
    ]) {
      let now = Date.now();
      const gw = await gateways.start({ now: () => now, env });
      const browser = await signIn(gw, await customer(gw));
      now += idleMs - 1;
      expect((await browser.get('/portal/api/session')).statusCode).toBe(200);
      now += idleMs - 1;
      expect((await browser.get('/portal/api/keys')).statusCode).toBe(200);
      now += idleMs;
      expectError(await browser.get('/portal/api/session'), 401, 'unauthorized');
    }
  });
});

describe('a portal session', () => {
  it('ends on sign-out: its cookie is cleared and no longer works', async () => {
    const gw = await gateways.start();
    const browser = await signIn(gw, await customer(gw));
    const out = await browser.send('POST', '/portal/api/sign-out');
    expect(out.statusCode).toBe(204);
    expect(String(out.headers['set-cookie'])).toMatch(
      /^portal_session=; Max-Age=0; Path=\/portal; HttpOnly; SameSite=Strict$/,
    );
    expectError(await browser.get('/portal/api/session'), 401, 'unauthorized');
  });

  it('refuses changes without the session’s CSRF token, and everything without a session', async () => {
    const gw = await gateways.start();
    const browser = await signIn(gw, await customer(gw));
    const without = await gw.portal.inject({
      method: 'POST',
      url: '/portal/api/keys',
      headers: { cookie: browser.cookie },
      payload: { name: 'x' },
    });
    expectError(without, 403, 'forbidden');
    const wrong = await gw.portal.inject({
      method: 'POST',
      url: '/portal/api/sign-out',
      headers: { cookie: browser.cookie, 'x-csrf-token': `${browser.csrf.slice(0, -1)}x` },
    });
    expectError(wrong, 403, 'forbidden');
    expect((await browser.get('/portal/api/keys')).json()).toEqual({ items: [] });
    expectError(await gw.portal.inject({ url: '/portal/api/usage' }), 401, 'unauthorized');
    expectError(
      await gw.portal.inject({ url: '/portal/api/usage', headers: { cookie: 'portal_session=forged' } }),
      401,
      'unauthorized',
    );
  });

  // Every unsafe method, not only POST (above): a PATCH or DELETE without the token changes nothing.
  it.each(['PATCH', 'DELETE'] as const)(
    'refuses a %s without the CSRF token or with a wrong one (403), leaving the key as it was',
    async (method) => {
      const gw = await gateways.start();
      const browser = await signIn(gw, await customer(gw));
      const made = await browser.send('POST', '/portal/api/keys', { name: 'ci' });
      expect(made.statusCode, made.body).toBe(201);
      const id = made.json().id as string;
      const before = (await browser.get('/portal/api/keys')).json();
      for (const token of [undefined, `${browser.csrf.slice(0, -1)}x`, '']) {
        const res = await gw.portal.inject({
          method,
          url: `/portal/api/keys/${id}`,
          headers: { cookie: browser.cookie, ...(token !== undefined ? { 'x-csrf-token': token } : {}) },
          ...(method === 'DELETE' ? {} : { payload: { scopes: ['pets:read'] } }),
        });
        expectError(res, 403, 'forbidden');
      }
      expect((await browser.get('/portal/api/keys')).json()).toEqual(before);
      // With the token the same request goes through.
      const allowed = await browser.send(
        method,
        `/portal/api/keys/${id}`,
        method === 'PATCH' ? { scopes: ['pets:read'] } : undefined,
      );
      expect(allowed.statusCode, allowed.body).toBe(method === 'PATCH' ? 200 : 204);
    },
  );

  it('leaves a portal.session-refused line on the request log for each cookie that names no session, and no audit line', async () => {
    const logs: Record<string, unknown>[] = [];
    let now = Date.now();
    const gw = await gateways.start({ now: () => now, logs });
    const id = await customer(gw);
    const ended = await signIn(gw, id);
    expect((await ended.send('POST', '/portal/api/sign-out')).statusCode).toBe(204);
    const idle = await signIn(gw, id);
    now += 15 * 60_000;
    const before = logs.length;
    const cookies = [
      ['portal_session=forged', 'malformed'],
      [`portal_session=${'A'.repeat(43)}`, 'unknown'],
      [ended.cookie, 'ended'],
      [idle.cookie, 'expired'],
    ] as const;
    for (const [cookie] of cookies) {
      expectError(await gw.portal.inject({ url: '/portal/api/usage', headers: { cookie } }), 401, 'unauthorized');
    }
    // No cookie at all is only the access log's 401: a visitor who never signed in is no event.
    expectError(await gw.portal.inject({ url: '/portal/api/usage' }), 401, 'unauthorized');
    const lines = logs.slice(before);
    expect(lines.filter((l) => l.event === 'portal.session-refused').map((l) => [l.reason, l.level])).toEqual(
      cookies.map(([, reason]) => [reason, 40]),
    );
    // Each line is the request's (its reqId), and none is an audit record.
    expect(lines.filter((l) => l.event === 'portal.session-refused').every((l) => typeof l.reqId === 'string')).toBe(
      true,
    );
    expect(lines.filter((l) => 'audit' in l)).toEqual([]);
  });

  it('answers 503 when the session store is away', async () => {
    const gw = await gateways.start();
    const browser = await signIn(gw, await customer(gw));
    gw.redis?.disconnect();
    expectError(await browser.get('/portal/api/session'), 503, 'store_unavailable');
  });
});
