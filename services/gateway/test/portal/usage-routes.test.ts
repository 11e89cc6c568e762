import { describe, expect, it } from 'vitest';
import { useGateways } from '../support/helpers.js';
import { admin, adminPost, signIn } from './support.js';

/*
 * GET /portal/api/usage/history by billing period: the admin API's customer history of the same
 * customer, step by step and unit by unit, for the default range, the current and previous
 * periods and a range given. On a fixed clock in the embedded history, as the admin route's own
 * test (a Redis hash of October would expire at once by Redis's real clock).
 */

const gateways = useGateways();
const at = (text: string) => Date.parse(text);

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
