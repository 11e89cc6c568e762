import { describe, expect, it } from 'vitest';
import { bearer, useGateways } from '../support/helpers.js';
import { admin, adminPost, signIn } from './support.js';

/*
 * GET /portal/api/usage/history by billing period: the admin API's customer history of the same
 * customer, step by step and unit by unit, for the default range, the current and previous
 * periods and a range given. On a fixed clock in the embedded history, as the admin route's own
 * test (a Redis hash of October would expire at once by Redis's real clock).
 */

const gateways = useGateways();
const at = (text: string) => Date.parse(text);

type Windows = Record<string, { limit: number; used: number; remaining: number; resetAt: string | null }>;

/** The same windows, counts exactly and each reset within a second. */
function expectSameWindows(actual: Windows, expected: Windows): void {
  expect(Object.keys(actual).sort()).toEqual(Object.keys(expected).sort());
  for (const [name, { resetAt, ...counts }] of Object.entries(actual)) {
    const other = expected[name] as Windows[string];
    expect(counts, name).toEqual({ limit: other.limit, used: other.used, remaining: other.remaining });
    if (resetAt === null || other.resetAt === null) expect(resetAt, name).toBe(other.resetAt);
    else expect(Math.abs(Date.parse(resetAt) - Date.parse(other.resetAt)), name).toBeLessThanOrEqual(1_000);
  }
}

describe('a customer’s usage by billing period in the portal', () => {
  it('agrees with GET /admin/customers/:id/usage/history?granularity=period to the unit', async () => {
    const gw = await gateways.start({
      redisUrl: null,
      now: () => at('2026-11-26T10:00:00Z'),
      env: { USAGE_HISTORY_DAYS: '90' },
    });
    const customer = await adminPost(gw, '/admin/customers', {
      name: 'Acme',
      plan: 'pro',
      billing: { anchorDay: 15, timeZone: 'Europe/Paris' },
    });
    const id = customer.id as string;
    // Either side of 15 November 00:00 in Paris (23:00 UTC on the 14th), and today; units of 3
    // and 2 and a refusal, so a step summed wrong, or in the wrong calendar, shows.
    for (const [instant, units] of [
      ['2026-09-30T08:00:00Z', 3],
      ['2026-10-14T22:00:00Z', 3],
      ['2026-11-14T22:59:59Z', 2],
      ['2026-11-14T23:00:00Z', 3],
      ['2026-11-26T09:00:00Z', 2],
    ] as const) {
      gw.deps.history.count(id, 'admitted', units, at(instant));
    }
    gw.deps.history.count(id, 'limited', 0, at('2026-11-20T12:00:00Z'));
    const browser = await signIn(gw, id);

    for (const query of [
      'granularity=period',
      'granularity=period&period=current',
      'granularity=period&period=previous',
      'granularity=period&from=2026-09-20&to=2026-11-20',
    ]) {
      const mine = await browser.get(`/portal/api/usage/history?${query}`);
      const theirs = await gw.admin.inject({ url: `/admin/customers/${id}/usage/history?${query}`, headers: admin });
      expect(mine.statusCode, mine.body).toBe(200);
      expect(theirs.statusCode, theirs.body).toBe(200);
      expect(mine.json(), query).toEqual(theirs.json());
    }

    const periods = (
      await browser.get('/portal/api/usage/history?granularity=period&from=2026-09-20&to=2026-11-20')
    ).json();
    expect(periods.granularity).toBe('period');
    expect(periods.series.map((s: { start: string; units: number }) => [s.start, s.units])).toEqual([
      ['2026-09-14T22:00:00.000Z', 3],
      ['2026-10-14T22:00:00.000Z', 5],
      ['2026-11-14T23:00:00.000Z', 5],
    ]);
    expect(periods.totals).toMatchObject({ units: 13, admitted: 5, limited: 1 });
  });
});

describe('a customer’s quotas now in the portal', () => {
  it.each(['redis', 'memory'] as const)(
    'show each key’s own windows as GET /v1/usage shows them, beside the shared ones (%s)',
    async (backend) => {
      const gw = await gateways.start(backend === 'memory' ? { redisUrl: null } : {});
      const customer = await adminPost(gw, '/admin/customers', {
        name: 'Acme',
        plan: 'pro',
        limits: { perMinute: 50 },
      });
      const id = customer.id as string;
      const own = await adminPost(gw, '/admin/keys', {
        customerId: id,
        name: 'prod',
        limits: { perMinute: 40, perDay: 900 },
      });
      const shared = await adminPost(gw, '/admin/keys', { customerId: id, name: 'ci' });
      for (let i = 0; i < 3; i++) await gw.app.inject({ url: '/v1/pets', headers: bearer(own.key as string) });
      for (let i = 0; i < 2; i++) await gw.app.inject({ url: '/v1/pets', headers: bearer(shared.key as string) });
      const browser = await signIn(gw, id);

      const res = await browser.get('/portal/api/usage');
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json();
      const v1 = (await gw.app.inject({ url: '/v1/usage', headers: bearer(own.key as string) })).json();
      // Only the key with limits of its own; its windows are GET /v1/usage's for that key (each
      // resetAt read from Redis's time left, so as near as the two reads are apart).
      expect(body.keys.map((k: { id: string; name: string }) => [k.id, k.name])).toEqual([[own.id, 'prod']]);
      expectSameWindows(body.keys[0].windows, v1.key.windows);
      expect(body.keys[0].windows).toMatchObject({
        minute: { limit: 40, used: 3, remaining: 37 },
        day: { limit: 900, used: 3, remaining: 897 },
      });
      expectSameWindows(body.windows, v1.customer.windows);
      expect(body.windows.minute).toMatchObject({ limit: 50, used: 5 });
      // Reading it took nothing from the key's windows.
      expect((await browser.get('/portal/api/usage')).json().keys[0].windows.minute.used).toBe(3);
    },
  );
});
