import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { ADMIN_TOKEN, bearer, type TestGateway } from '../support/helpers.js';

// What the portal's tests share: customers and keys made through the admin API, a sign-in, and
// requests as the page makes them (the session cookie, the CSRF token on changes).

export const admin = bearer(ADMIN_TOKEN);

export async function adminPost(gw: TestGateway, url: string, payload?: object): Promise<Record<string, string>> {
  const res = await gw.admin.inject({ method: 'POST', url, headers: admin, ...(payload ? { payload } : {}) });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

/** The path and query of a sign-in link (what a browser asks the portal's listener for). */
export const linkPath = (url: string): string => {
  const { pathname, search } = new URL(url);
  return `${pathname}${search}`;
};

/** The session cookie a response sets, as `name=value` for the next request's Cookie header. */
export function sessionCookie(res: LightMyRequestResponse): string {
  const header = [res.headers['set-cookie'] ?? []].flat()[0] ?? '';
  return header.split(';')[0] as string;
}

export interface Browser {
  cookie: string;
  csrf: string;
  get(url: string): Promise<LightMyRequestResponse>;
  send(method: 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object): Promise<LightMyRequestResponse>;
}

/** A customer signed in from a fresh link, as its browser would be. */
export async function signIn(gw: TestGateway, customerId: string): Promise<Browser> {
  const { url } = await adminPost(gw, `/admin/customers/${customerId}/portal-sessions`);
  const entered = await gw.portal.inject({ url: linkPath(url as string) });
  expect(entered.statusCode, entered.body).toBe(303);
  const cookie = sessionCookie(entered);
  const session = await gw.portal.inject({ url: '/portal/api/session', headers: { cookie } });
  expect(session.statusCode, session.body).toBe(200);
  const csrf = session.json().csrfToken as string;
  return {
    cookie,
    csrf,
    get: (url) => gw.portal.inject({ url, headers: { cookie } }),
    send: (method, url, payload) =>
      gw.portal.inject({
        method,
        url,
        headers: { cookie, 'x-csrf-token': csrf },
        ...(payload ? { payload } : {}),
      }),
  };
}
