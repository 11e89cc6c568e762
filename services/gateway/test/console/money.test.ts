import { describe, expect, it } from 'vitest';
import { money } from '../../console/money.js';
import { useGateways } from '../support/helpers.js';

// console/money.js: money as the console's customer page and the portal's invoice page write it.

describe('money', () => {
  it("writes integer minor units in the currency's own digits, exactly, however large", () => {
    expect(money(4950, 'EUR', 'en-US')).toBe('€49.50');
    expect(money(5, 'EUR', 'en-US')).toBe('€0.05');
    expect(money(0, 'EUR', 'en-US')).toBe('€0.00');
    expect(money(-1250, 'EUR', 'en-US')).toBe('-€12.50');
    expect(money(4950, 'EUR', 'de-DE')).toBe('49,50\u00a0€');
    // No minor unit (yen), three (Bahraini dinar).
    expect(money(4950, 'JPY', 'en-US')).toBe('¥4,950');
    expect(money(4950, 'BHD', 'en-US')).toBe('BHD\u00a04.950');
    // 2^53 − 1 cents: a float of the major units (90071992547409.91) would not round-trip.
    expect(money(Number.MAX_SAFE_INTEGER, 'USD', 'en-US')).toBe('$90,071,992,547,409.91');
  });
});

describe('one file for both pages', () => {
  const gateways = useGateways();

  it('the portal serves the console’s money.js byte for byte, under the portal’s own CSP', async () => {
    const gw = await gateways.start();
    const consoleFile = await gw.admin.inject({ url: '/console/money.js' });
    const portalFile = await gw.portal.inject({ url: '/portal/money.js' });
    expect([consoleFile.statusCode, portalFile.statusCode]).toEqual([200, 200]);
    expect(portalFile.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(portalFile.headers['content-security-policy']).toContain("script-src 'self'");
    expect(portalFile.body).toBe(consoleFile.body);
    expect(portalFile.body).toContain('export function money(');
  });
});
