import { describe, expect, it } from 'vitest';
import { auth, createKey, expectError, pets, useEchoUpstream } from '../../support/admin.js';
import { startGateway } from '../../support/helpers.js';

// Every ban in force, counted and listed (admin/routes/bans.ts).
const upstream = useEchoUpstream();

describe('GET /admin/bans', () => {
  it.each(['memory', 'redis'] as const)(
    'counts every banned key, lists those ending first with name and customer, and forgets one lifted (%s)',
    async (backend) => {
      const gw = await startGateway({
        upstream: upstream.url,
        ...(backend === 'memory' ? { redisUrl: null } : {}),
        env: { BAN_THRESHOLD: '1', BAN_GRACE_MS: '0' },
      });
      try {
        const bans = async (query = '') => {
          const res = await gw.admin.inject({ method: 'GET', url: `/admin/bans${query}`, headers: auth });
          expect(res.statusCode, res.body).toBe(200);
          return res.json() as { count: number; items: Array<Record<string, string>> };
        };
        expect(await bans()).toEqual({ count: 0, items: [] });
        const made = await gw.admin.inject({
          method: 'POST',
          url: '/admin/customers',
          headers: auth,
          payload: { name: 'Acme', plan: 'enterprise', limits: { perMinute: 100 } },
        });
        const customerId = made.json().id as string;
        const alone = await createKey(gw, { plan: 'enterprise', name: 'alone', limits: { perMinute: 1 } });
        const owned = await createKey(gw, { customerId, name: 'owned', limits: { perMinute: 1 } });
        const spared = await createKey(gw, { plan: 'enterprise', name: 'spared', limits: { perMinute: 1 } });
        // One admitted, one refused (counted), the next banned: the threshold is 1.
        for (const key of [alone, owned]) {
          expect((await pets(gw, key.key)).statusCode).toBe(200);
          expectError(await pets(gw, key.key), 429, 'rate_limit_exceeded');
          expectError(await pets(gw, key.key), 429, 'api_key_banned');
        }
        expect((await pets(gw, spared.key)).statusCode).toBe(200);
        expectError(await pets(gw, spared.key), 429, 'rate_limit_exceeded');

        const all = await bans();
        expect(all.count).toBe(2);
        expect(all.items).toEqual([
          { id: alone.id, name: 'alone', bannedUntil: expect.stringMatching(/Z$/) },
          { id: owned.id, name: 'owned', customerId, bannedUntil: expect.stringMatching(/Z$/) },
        ]);
        // The same instant each key's own page shows.
        const shown = (await gw.admin.inject({ method: 'GET', url: `/admin/keys/${owned.id}`, headers: auth })).json();
        expect(Math.abs(Date.parse(shown.bannedUntil) - Date.parse(all.items[1]?.bannedUntil as string))).toBeLessThan(
          1_000,
        );
        expect(await bans('?limit=1')).toEqual({ count: 2, items: [all.items[0]] });

        const lift = await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${alone.id}/ban`, headers: auth });
        expect(lift.statusCode).toBe(204);
        expect(await bans()).toEqual({ count: 1, items: [all.items[1]] });
        expectError(
          await gw.admin.inject({ method: 'GET', url: '/admin/bans?limit=0', headers: auth }),
          400,
          'invalid_request',
        );
      } finally {
        await gw.close();
      }
    },
  );
});
