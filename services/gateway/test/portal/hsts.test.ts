import { describe, expect, it } from 'vitest';
import { useGateways } from '../support/helpers.js';

/*
 * Strict-Transport-Security on the portal: sent only on answers to requests that came over TLS,
 * which the portal learns from X-Forwarded-Proto only when TRUST_PROXY names the proxy sending it.
 * (tls.test.ts sees the header through a real TLS terminator.)
 */

const gateways = useGateways();
const HTTPS = { 'x-forwarded-proto': 'https' };

describe('the portal’s Strict-Transport-Security', () => {
  it('is sent when a proxy TRUST_PROXY names says the request came over https, on pages, API answers and errors', async () => {
    const gw = await gateways.start({ env: { TRUST_PROXY: 'loopback' } });
    for (const url of ['/portal', '/portal/api/session', '/portal/no-such-page']) {
      const res = await gw.portal.inject({ url, headers: HTTPS });
      expect(res.headers['strict-transport-security'], url).toBe('max-age=31536000');
    }
  });

  it('is not sent over plain http, with or without TRUST_PROXY', async () => {
    for (const env of [{ TRUST_PROXY: 'loopback' }, {}] as Record<string, string>[]) {
      const gw = await gateways.start({ env });
      const res = await gw.portal.inject({ url: '/portal' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['strict-transport-security']).toBeUndefined();
    }
  });

  it('is not sent for an X-Forwarded-Proto: https that no trusted proxy sent', async () => {
    const gw = await gateways.start({ env: {} });
    const res = await gw.portal.inject({ url: '/portal', headers: HTTPS });
    expect(res.statusCode).toBe(200);
    expect(res.headers['strict-transport-security']).toBeUndefined();
    // Nor from an address TRUST_PROXY does not name.
    const named = await gateways.start({ env: { TRUST_PROXY: '10.0.0.0/8' } });
    const other = await named.portal.inject({ url: '/portal', headers: HTTPS, remoteAddress: '198.51.100.7' });
    expect(other.headers['strict-transport-security']).toBeUndefined();
  });
});
