import { describe, expect, it } from 'vitest';
import { useGateways } from '../support/helpers.js';

/*
 * The headers of every portal answer as a browser receives them from the listener: no cache may
 * keep any of them; its files each of their type, never sniffed, framed or sent with a referrer;
 * and the listener's log lines under its own service name.
 */

const gateways = useGateways();

describe('the portal listener’s headers', () => {
  it('forbid caching on pages, API answers and errors', async () => {
    const gw = await gateways.start({ redisUrl: null });
    for (const url of ['/portal', '/portal/style.css', '/portal/api/session', '/portal/no-such-page']) {
      const res = await gw.portal.inject({ url });
      expect(res.headers['cache-control'], url).toBe('no-store');
    }
  });

  it('give each file its type and keep it from being sniffed, framed or followed by a referrer', async () => {
    const gw = await gateways.start({ redisUrl: null });
    for (const [url, type] of [
      ['/portal', 'text/html; charset=utf-8'],
      ['/portal/keys.js', 'text/javascript; charset=utf-8'],
      ['/portal/style.css', 'text/css; charset=utf-8'],
      ['/portal/favicon.svg', 'image/svg+xml'],
      ['/portal/shared/base.css', 'text/css; charset=utf-8'],
      ['/portal/vendor/preact.js', 'text/javascript; charset=utf-8'],
    ] as const) {
      const res = await gw.portal.inject({ url });
      expect(res.statusCode, url).toBe(200);
      expect(res.headers, url).toMatchObject({
        'content-type': type,
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
        'x-frame-options': 'DENY',
      });
    }
  });

  it('log as the portal’s own service', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ redisUrl: null, logs });
    await gw.portal.inject({ url: '/portal' });
    expect(logs.filter((l) => l.path === '/portal').map((l) => l.service)).toEqual(['gateway-portal']);
  });
});
