import { afterEach, describe, expect, it, vi } from 'vitest';
import { expectError } from '../support/admin.js';
import { startGateway } from '../support/helpers.js';

/*
 * The wait a refused address is told, to the second, and what the refusal says: on a gateway
 * without Redis, whose per-address windows count on the wall clock, here a fake Date the test sets
 * (timers stay real).
 */

const T0 = Date.parse('2026-11-26T10:00:00.000Z');

afterEach(() => {
  vi.useRealTimers();
});

describe('a refused address is told how long to wait', () => {
  it('in whole seconds rounded up, in Retry-After, RateLimit and the message, for each window', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: T0 });
    const logs: Record<string, unknown>[] = [];
    const gw = await startGateway({ env: { PORTAL_PER_MINUTE: '2', PORTAL_SIGN_IN_PER_MINUTE: '1' }, logs });
    try {
      for (let i = 0; i < 2; i++) expect((await gw.portal.inject({ url: '/portal' })).statusCode).toBe(200);
      vi.setSystemTime(T0 + 30_400);
      const page = await gw.portal.inject({ url: '/portal' });
      expectError(page, 429, 'rate_limit_exceeded');
      expect(page.headers['retry-after']).toBe('30');
      expect(page.headers.ratelimit).toBe('"portal";r=0;t=30');
      expect(page.json().message).toBe('Too many requests from this address; retry in 30 s');

      const other = { remoteAddress: '198.51.100.7' };
      const token = `/portal/enter?token=${'x'.repeat(43)}`;
      expect((await gw.portal.inject({ url: token, ...other })).statusCode).toBe(404);
      // Its second visit, 900 ms before its windows end: within the page budget, past sign-in's.
      vi.setSystemTime(T0 + 30_400 + 59_100);
      const signIn = await gw.portal.inject({ url: token, ...other });
      expectError(signIn, 429, 'rate_limit_exceeded');
      expect(signIn.headers['retry-after']).toBe('1');
      expect(signIn.headers.ratelimit).toBe('"portal-sign-in";r=0;t=1');
      expect(signIn.json().message).toBe('Too many sign-in attempts from this address; retry in 1 s');
      // The same address refused by its other window too: one line per address and window.
      expectError(await gw.portal.inject({ url: '/portal', ...other }), 429, 'rate_limit_exceeded');
      expect(logs.filter((l) => l.audit === 'portal.limited').map((l) => [l.window, l.msg])).toEqual([
        ['portal', 'portal: portal limit reached'],
        ['portal-sign-in', 'portal: portal-sign-in limit reached'],
        ['portal', 'portal: portal limit reached'],
      ]);
    } finally {
      await gw.close();
    }
  });
});
