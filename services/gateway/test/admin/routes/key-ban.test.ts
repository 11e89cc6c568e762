import { describe, expect, it } from 'vitest';
import { auth, createKey, expectError, pets, useEchoUpstream } from '../../support/admin.js';
import { startGateway } from '../../support/helpers.js';

// Lifting a key's ban (admin/routes/key-ban.ts).
const upstream = useEchoUpstream();

describe('DELETE /admin/keys/:id/ban (lift a ban)', () => {
  it('bans a free key on the 51st refusal after 60 admitted (BAN_THRESHOLD 50), and lifting it leaves only the rate limit', async () => {
    const gw = await startGateway({ upstream: upstream.url });
    try {
      const created = await createKey(gw, { plan: 'free' });
      for (let i = 1; i <= 60; i++) expect((await pets(gw, created.key)).statusCode, `request ${i}`).toBe(200);
      // Each refusal counts until the minute ends: refusals 1-50 are plain rate limiting, the 51st is the ban.
      for (let i = 1; i <= 50; i++) expectError(await pets(gw, created.key), 429, 'rate_limit_exceeded');
      const banned = await pets(gw, created.key);
      expectError(banned, 429, 'api_key_banned');
      const retryAfter = Number(banned.headers['retry-after']);
      expect(retryAfter).toBeGreaterThan(60);
      expect(retryAfter).toBeLessThanOrEqual(900);
      expectError(await pets(gw, created.key), 429, 'api_key_banned');

      const lift = await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${created.id}/ban`, headers: auth });
      expect(lift.statusCode).toBe(204);
      // The minute window is still spent, so the key is rate limited, no longer banned.
      expectError(await pets(gw, created.key), 429, 'rate_limit_exceeded');
    } finally {
      await gw.close();
    }
  });

  it('shows bannedUntil while banned; lifting clears it and the count of refusals', async () => {
    const gw = await startGateway({ upstream: upstream.url, env: { BAN_THRESHOLD: '2', BAN_GRACE_MS: '0' } });
    try {
      const created = await createKey(gw, { plan: 'enterprise', limits: { perMinute: 2, perDay: 100 } });
      const show = () => gw.admin.inject({ method: 'GET', url: `/admin/keys/${created.id}`, headers: auth });
      expect((await pets(gw, created.key)).statusCode).toBe(200);
      expect((await pets(gw, created.key)).statusCode).toBe(200);
      expectError(await pets(gw, created.key), 429, 'rate_limit_exceeded');
      expectError(await pets(gw, created.key), 429, 'rate_limit_exceeded');
      expect((await show()).json()).not.toHaveProperty('bannedUntil');

      const banned = await pets(gw, created.key);
      expectError(banned, 429, 'api_key_banned');
      const shown = (await show()).json();
      expect(new Date(shown.bannedUntil).toISOString()).toBe(shown.bannedUntil);
      const untilMs = Date.parse(shown.bannedUntil);
      expect(untilMs).toBeGreaterThan(Date.now() + 800_000);
      expect(untilMs).toBeLessThanOrEqual(Date.now() + 900_000);
      expect(Number(banned.headers['x-ratelimit-reset'])).toBe(Math.ceil(untilMs / 1000));
      const listed = (await gw.admin.inject({ method: 'GET', url: '/admin/keys', headers: auth })).json().items;
      expect(listed.find((k: { id: string }) => k.id === created.id).bannedUntil).toBe(shown.bannedUntil);

      const lift = await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${created.id}/ban`, headers: auth });
      expect(lift.statusCode).toBe(204);
      expect(lift.body).toBe('');
      expect((await show()).json()).not.toHaveProperty('bannedUntil');

      // Still over the minute limit: plain rate limiting again, and the refusals count from zero.
      expectError(await pets(gw, created.key), 429, 'rate_limit_exceeded');
      expectError(await pets(gw, created.key), 429, 'rate_limit_exceeded');
      expectError(await pets(gw, created.key), 429, 'api_key_banned');
    } finally {
      await gw.close();
    }
  });

  it('answers 204 for a key that is not banned, and 404 for an unknown id', async () => {
    const gw = await startGateway({ upstream: upstream.url });
    try {
      const created = await createKey(gw, { plan: 'free' });
      const res = await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${created.id}/ban`, headers: auth });
      expect(res.statusCode).toBe(204);
      expect((await pets(gw, created.key)).statusCode).toBe(200);
      expectError(
        await gw.admin.inject({ method: 'DELETE', url: '/admin/keys/key_0000000000000000/ban', headers: auth }),
        404,
        'not_found',
      );
    } finally {
      await gw.close();
    }
  });
});
