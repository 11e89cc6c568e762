import { describe, expect, it } from 'vitest';
import { SHARED_FILES } from '../../src/web-ui/shared-files.js';
import { money } from '../../ui-shared/format.js';
import { useGateways } from '../support/helpers.js';

// ui-shared/format.js: money as the console's customer page and the portal's invoice page write
// it; and the shared files, served alike by both apps.

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

describe('one set of shared files for both apps', () => {
  const gateways = useGateways();

  it('the console and the portal serve each ui-shared file and preact, htm byte for byte, each under its own CSP', async () => {
    const gw = await gateways.start();
    const names = [
      ...SHARED_FILES.map(([name]) => `shared/${name}`),
      'vendor/preact.js',
      'vendor/preact-hooks.js',
      'vendor/htm.js',
    ];
    for (const name of names) {
      const consoleFile = await gw.admin.inject({ url: `/console/${name}` });
      const portalFile = await gw.portal.inject({ url: `/portal/${name}` });
      expect([consoleFile.statusCode, portalFile.statusCode], name).toEqual([200, 200]);
      expect(portalFile.headers['content-type'], name).toBe(consoleFile.headers['content-type']);
      expect(portalFile.body, name).toBe(consoleFile.body);
      // Each page's own policy: its own origin's files and its own import map, nothing inline else.
      expect(portalFile.headers['content-security-policy']).toMatch(/script-src 'self' 'sha256-[^']+';/);
      expect(portalFile.headers['content-security-policy']).not.toBe(consoleFile.headers['content-security-policy']);
    }
    expect((await gw.portal.inject({ url: '/portal/shared/format.js' })).body).toContain('export function money(');
  });
});
