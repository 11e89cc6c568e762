import { describe, expect, it } from 'vitest';
import type { PortalSessionStore } from '../../src/customers/portal-session-store.js';
import { SESSION_TTL_MS } from '../../src/portal/session-cookie.js';
import { expectError } from '../support/admin.js';
import { type TestGateway, useGateways } from '../support/helpers.js';
import { admin, adminPost, linkPath, sessionCookie, signIn } from './support.js';

/*
 * The edges of a portal session as a browser and an operator meet them: the cookie's Secure flag
 * from PORTAL_URL alone and on sign-out, what a refused link says, which methods need the CSRF
 * token, the audit lines of a sign-out and a refused token, and a store that cannot say why.
 */

const gateways = useGateways();

async function customer(gw: TestGateway): Promise<string> {
  return (await adminPost(gw, '/admin/customers', { name: 'Acme', plan: 'pro' })).id as string;
}

describe('the session cookie’s Secure flag', () => {
  it('is set when PORTAL_URL is https, though the request came over plain http', async () => {
    const gw = await gateways.start({ env: { PORTAL_URL: 'https://portal.example.com' } });
    const { url } = await adminPost(gw, `/admin/customers/${await customer(gw)}/portal-sessions`);
    const entered = await gw.portal.inject({ url: linkPath(url as string) });
    expect(entered.statusCode).toBe(303);
    expect(String(entered.headers['set-cookie'])).toMatch(/^portal_session=[\w-]{43}; Max-Age=3600; .*; Secure; /);
  });

  it('is set on the cookie sign-out clears behind TLS, and not over plain http', async () => {
    const gw = await gateways.start({ env: { TRUST_PROXY: 'loopback' } });
    const id = await customer(gw);
    for (const [headers, secure] of [
      [{ 'x-forwarded-proto': 'https' }, true],
      [{}, false],
    ] as const) {
      const browser = await signIn(gw, id);
      const out = await gw.portal.inject({
        method: 'POST',
        url: '/portal/api/sign-out',
        headers: { ...headers, cookie: browser.cookie, 'x-csrf-token': browser.csrf },
      });
      expect(out.statusCode).toBe(204);
      const cleared = String(out.headers['set-cookie']);
      expect(cleared).toMatch(/^portal_session=; Max-Age=0; Path=\/portal; HttpOnly; /);
      expect(cleared.includes('; Secure'), JSON.stringify(headers)).toBe(secure);
    }
  });
});

describe('a refused sign-in link', () => {
  it('says, as plain text, that it expired or was used, with no cookie: unknown, empty, or given twice', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ logs });
    const id = await customer(gw);
    const { url } = await adminPost(gw, `/admin/customers/${id}/portal-sessions`);
    const token = new URL(url as string).searchParams.get('token') as string;
    for (const path of [
      `/portal/enter?token=${'A'.repeat(43)}`,
      '/portal/enter?token=',
      `/portal/enter?token=${token}&token=${token}`,
    ]) {
      const res = await gw.portal.inject({ url: path });
      expect(res.statusCode, path).toBe(404);
      expect(res.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(res.body).toBe(
        'This sign-in link has expired or was already used. Ask for a new one where you came from.',
      );
      expect(res.headers['set-cookie']).toBeUndefined();
    }
    // The link given twice in one query was not used up by it.
    expect((await gw.portal.inject({ url: linkPath(url as string) })).statusCode).toBe(303);
    expect(logs.filter((l) => typeof l.audit === 'string' && l.audit.startsWith('portal.')).map((l) => l.msg)).toEqual([
      ...Array(3).fill('portal: a sign-in link that is unknown, used or expired'),
      `portal: ${id} signed in`,
    ]);
  });
});

describe('the CSRF token', () => {
  it('is not asked of GET, HEAD or OPTIONS, and its refusal is an audit line naming the customer', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ logs });
    const id = await customer(gw);
    const browser = await signIn(gw, id);
    const cookie = browser.cookie;
    expect((await gw.portal.inject({ method: 'HEAD', url: '/portal/api/keys', headers: { cookie } })).statusCode).toBe(
      200,
    );
    // No OPTIONS route: the router's 405, not the token check's 403.
    const options = await gw.portal.inject({ method: 'OPTIONS', url: '/portal/api/keys', headers: { cookie } });
    expect(options.statusCode).toBe(405);
    const noToken = await gw.portal.inject({ method: 'POST', url: '/portal/api/sign-out', headers: { cookie } });
    expectError(noToken, 403, 'forbidden');
    expect(noToken.json().message).toBe("Send the session's CSRF token in x-csrf-token");
    const noSession = await gw.portal.inject({ url: '/portal/api/keys' });
    expectError(noSession, 401, 'unauthorized');
    expect(noSession.json().message).toBe('Not signed in, or the session has ended: sign in again');
    const refused = logs.filter((l) => l.audit === 'portal.csrf_refused');
    expect(refused).toEqual([expect.objectContaining({ customerId: id, level: 40 })]);
    expect(refused[0]?.msg).toBe('portal: a request without its CSRF token');
    // The session was not ended by the refused sign-out.
    expect((await browser.get('/portal/api/session')).statusCode).toBe(200);
  });
});

describe('a path spelt with percent-escapes', () => {
  // The router matches `/portal/%61pi/…` to `/portal/api/…`: the session and token checks must too.
  it('is the same route to the session check: 401 without a session, 403 without the token, served with both', async () => {
    const gw = await gateways.start({ redisUrl: null });
    const browser = await signIn(gw, await customer(gw));
    const signOut = '/portal/%61pi/sign-out';
    expectError(await gw.portal.inject({ method: 'POST', url: signOut }), 401, 'unauthorized');
    expectError(
      await gw.portal.inject({ method: 'POST', url: signOut, headers: { cookie: browser.cookie } }),
      403,
      'forbidden',
    );
    const session = await gw.portal.inject({ url: '/portal/%61pi/session', headers: { cookie: browser.cookie } });
    expect(session.statusCode, session.body).toBe(200);
    expect((await browser.send('POST', signOut)).statusCode).toBe(204);
    expectError(await browser.get('/portal/api/session'), 401, 'unauthorized');
  });
});

describe('a session’s lines and times', () => {
  it('audits a sign-out with its customer, and the admin’s link with its end', async () => {
    const logs: Record<string, unknown>[] = [];
    let now = Date.parse('2026-11-26T10:00:00Z');
    const gw = await gateways.start({ logs, now: () => now, redisUrl: null });
    const id = await customer(gw);
    const link = await gw.admin.inject({
      method: 'POST',
      url: `/admin/customers/${id}/portal-sessions`,
      headers: admin,
    });
    expect(link.json().expiresAt).toBe('2026-11-26T10:05:00.000Z');
    expect(logs.filter((l) => l.audit === 'portal_session.created')).toEqual([
      expect.objectContaining({ customerId: id, expiresAt: '2026-11-26T10:05:00.000Z' }),
    ]);
    // An id no customer could have is refused by its shape, before any store is asked.
    const long = await gw.admin.inject({
      method: 'POST',
      url: `/admin/customers/${'c'.repeat(65)}/portal-sessions`,
      headers: admin,
    });
    expectError(long, 400, 'invalid_request');
    now += 60_000;
    const entered = await gw.portal.inject({ url: linkPath(link.json().url) });
    const cookie = sessionCookie(entered);
    const session = (await gw.portal.inject({ url: '/portal/api/session', headers: { cookie } })).json();
    expect(session.expiresAt).toBe(new Date(now + SESSION_TTL_MS).toISOString());
    const out = await gw.portal.inject({
      method: 'POST',
      url: '/portal/api/sign-out',
      headers: { cookie, 'x-csrf-token': session.csrfToken },
    });
    expect(out.statusCode).toBe(204);
    const signedOut = logs.filter((l) => l.audit === 'portal.signed_out');
    expect(signedOut).toEqual([expect.objectContaining({ customerId: id })]);
    expect(signedOut[0]?.msg).toBe(`portal: ${id} signed out`);
  });

  it('is 401 with its reason `unknown` on the log when the store cannot say why a cookie names no session', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ logs });
    const store = gw.deps.portalSessions;
    // Built on the portal's first request: the listener takes this store.
    const failing: PortalSessionStore = {
      kind: store.kind,
      putLink: (...a) => store.putLink(...a),
      takeLink: (...a) => store.takeLink(...a),
      putSession: (...a) => store.putSession(...a),
      getSession: (...a) => store.getSession(...a),
      endSession: (...a) => store.endSession(...a),
      whyGone: async () => {
        throw new Error('the store cannot say');
      },
    };
    gw.deps.portalSessions = failing;
    const res = await gw.portal.inject({
      url: '/portal/api/usage',
      headers: { cookie: `portal_session=${'A'.repeat(43)}` },
    });
    expectError(res, 401, 'unauthorized');
    expect(logs.filter((l) => l.event === 'portal.session-refused').map((l) => [l.reason, l.msg])).toEqual([
      ['unknown', 'portal: a session cookie refused (unknown)'],
    ]);
  });
});
