import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@animal-store/common/env.js';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { generateApiKey, hashApiKey } from '../../src/keys/api-key.js';
import { createKey, newSecret } from '../../src/keys/create-key.js';
import { toKeyFileEntry } from '../../src/keys/keys-file.js';
import {
  ADMIN_TOKEN,
  bearer,
  type GatewayOptions,
  startGateway,
  type TestGateway,
  useGateways,
} from '../support/helpers.js';

const admin = bearer(ADMIN_TOKEN);
const gateways = useGateways();

/** A clock the test moves: expiry and grace are checked against the gateway's `now`. */
function clock() {
  const c = { at: Date.now(), now: () => c.at };
  return c;
}

interface Usage {
  id: string;
  plan: string;
  limits: { perMinute: number; perDay: number };
  windows: Record<'minute' | 'day', { limit: number; used: number; remaining: number; resetAt: string | null }>;
  ban: { until: string } | null;
  refusals: number;
}

function expectError(res: LightMyRequestResponse, status: number, code: string, message?: RegExp): void {
  expect(res.statusCode, res.body).toBe(status);
  const body = res.json();
  expect(Object.keys(body).sort()).toEqual(['code', 'message', 'status']);
  expect(body).toMatchObject({ code, status });
  if (message) expect(body.message).toMatch(message);
}

async function create(gw: TestGateway, payload: Record<string, unknown>): Promise<{ id: string; key: string }> {
  const res = await gw.admin.inject({ method: 'POST', url: '/admin/keys', headers: admin, payload });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

function call(gw: TestGateway, key: string) {
  return gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
}

function patch(gw: TestGateway, id: string, payload: unknown) {
  return gw.admin.inject({ method: 'PATCH', url: `/admin/keys/${id}`, headers: admin, payload: payload as object });
}

function rotate(gw: TestGateway, id: string, payload?: unknown) {
  return gw.admin.inject({
    method: 'POST',
    url: `/admin/keys/${id}/rotate`,
    headers: admin,
    ...(payload === undefined ? {} : { payload: payload as object }),
  });
}

async function usage(gw: TestGateway, id: string): Promise<Usage> {
  const res = await gw.admin.inject({ url: `/admin/keys/${id}/usage`, headers: admin });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function spend(gw: TestGateway, key: string, n: number): Promise<LightMyRequestResponse> {
  let last: LightMyRequestResponse | undefined;
  for (let i = 0; i < n; i++) last = await call(gw, key);
  return last as LightMyRequestResponse;
}

let plansDir: string | undefined;
afterAll(async () => {
  if (plansDir) await rm(plansDir, { recursive: true, force: true });
});

/** A PLANS_FILE with the built-in free and pro plans as a deployment would write them. */
async function plansFile(): Promise<string> {
  plansDir ??= await mkdtemp(join(tmpdir(), 'lifecycle-plans-'));
  const path = join(plansDir, 'plans.json');
  await writeFile(
    path,
    JSON.stringify({
      plans: { free: { windows: { minute: 60, day: 1000 } }, pro: { windows: { minute: 300, day: 10000 } } },
    }),
  );
  return path;
}

const LIMITERS: Array<[string, GatewayOptions]> = [
  ['memory limiter', { redisUrl: null }],
  ['Redis limiter', {}],
];

describe.each(LIMITERS)('key lifecycle on the %s', (_label, limiter) => {
  const start = (options: GatewayOptions = {}) => gateways.start({ ...limiter, ...options });

  describe('PATCH /admin/keys/:id', () => {
    it('upgrades free to pro mid-window: the count carries over (50 used → limit 300, remaining 249)', async () => {
      const gw = await start();
      const { id, key } = await create(gw, { plan: 'free' });
      const before = await spend(gw, key, 50);
      expect(before.headers['x-ratelimit-remaining']).toBe('10');
      const res = await patch(gw, id, { plan: 'pro' });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({
        id,
        plan: 'pro',
        limits: { perMinute: 300, perDay: 10_000 },
        source: 'store',
      });
      const next = await call(gw, key);
      expect(next.statusCode).toBe(200);
      expect(next.headers['x-ratelimit-limit']).toBe('300');
      expect(next.headers['x-ratelimit-remaining']).toBe('249');
    });

    it('downgrades below what was used: the next request is refused until the window resets', async () => {
      const gw = await start();
      const { id, key } = await create(gw, { plan: 'pro' });
      await spend(gw, key, 70);
      expect((await patch(gw, id, { plan: 'free' })).statusCode).toBe(200);
      const next = await call(gw, key);
      expectError(next, 429, 'rate_limit_exceeded');
      expect(next.headers['x-ratelimit-limit']).toBe('60');
      expect(next.headers['x-ratelimit-remaining']).toBe('0');
    });

    it('moves to enterprise with limits, and back to a plan, which drops them', async () => {
      const gw = await start();
      const { id, key } = await create(gw, { plan: 'pro' });
      const up = await patch(gw, id, { plan: 'enterprise', limits: { perMinute: 7, perDay: 70 } });
      expect(up.json()).toMatchObject({ plan: 'enterprise', limits: { perMinute: 7, perDay: 70 } });
      expect((await call(gw, key)).headers['x-ratelimit-limit']).toBe('7');
      // Enterprise keeps its limits when only the name changes; new limits replace them.
      expect((await patch(gw, id, { name: 'acme' })).json()).toMatchObject({ name: 'acme', limits: { perMinute: 7 } });
      expect((await patch(gw, id, { limits: { perMinute: 9, perDay: 90 } })).json().limits).toEqual({
        perMinute: 9,
        perDay: 90,
      });
      const down = await patch(gw, id, { plan: 'business' });
      expect(down.json()).toMatchObject({ plan: 'business', limits: { perMinute: 1000, perDay: 100_000 } });
      expect((await call(gw, key)).headers['x-ratelimit-limit']).toBe('1000');
      const shown = await gw.admin.inject({ url: `/admin/keys/${id}`, headers: admin });
      expect(shown.json()).toEqual(down.json());
    });

    it.each([
      ['the built-in plans', {}],
      ['a PLANS_FILE', { PLANS_FILE: 'plans' }],
    ])(
      'keeps a key’s own limits through a change of anything but its plan, with %s; a plan change drops them',
      async (_plans, env) => {
        const gw = await start({ env: 'PLANS_FILE' in env ? { PLANS_FILE: await plansFile() } : {} });
        const { id, key } = await create(gw, { plan: 'free', limits: { perMinute: 100 } });
        const changes: Array<Record<string, unknown>> = [
          { name: 'renamed' },
          { expiresAt: '2099-01-01T00:00:00Z' },
          { expiresAt: null },
          { scopes: ['pets:read'] },
          { scopes: null },
          { allowedCidrs: ['127.0.0.0/8'] },
          { allowedCidrs: null },
          // The plan it already has is no change of plan.
          { plan: 'free' },
        ];
        for (const change of changes) {
          const res = await patch(gw, id, change);
          expect(res.statusCode, res.body).toBe(200);
          expect(res.json().limits, JSON.stringify(change)).toEqual({ perMinute: 100, perDay: 1000 });
          const next = await call(gw, key);
          expect(next.statusCode, next.body).toBe(200);
          expect(next.headers['x-ratelimit-limit'], JSON.stringify(change)).toBe('100');
        }
        const moved = await patch(gw, id, { plan: 'pro' });
        expect(moved.json().limits).toEqual({ perMinute: 300, perDay: 10_000 });
        expect((await call(gw, key)).headers['x-ratelimit-limit']).toBe('300');
      },
    );

    it('validates as create does, and changes nothing when it refuses', async () => {
      const gw = await start();
      const { id } = await create(gw, { plan: 'free', name: 'kept' });
      const cases: Array<[unknown, RegExp]> = [
        [{ plan: 'enterprise' }, /enterprise keys need limits/],
        [{ limits: { perMinute: 2000 } }, /limits.perMinute cannot exceed limits.perDay/],
        [{ plan: 'pro', limits: { perWeek: 2 } }, /limits/],
        [{ plan: 'enterprise', limits: { perMinute: 3, perDay: 2 } }, /cannot exceed/],
        [{ plan: 'gold' }, /plan/],
        [{ expiresAt: 'next week' }, /expiresAt must be an RFC 3339 timestamp/],
        [{ expiresAt: '2020-01-01T00:00:00Z' }, /expiresAt must be in the future/],
        [{ expiresAt: '2031-02-30T00:00:00Z' }, /not a real date/],
        [{ expiresAt: '2031-11-31T00:00:00Z' }, /expiresAt is not a real date/],
        [{ expiresAt: '2031-11-30T24:00:00Z' }, /expiresAt is not a real date/],
        [{ name: '' }, /name/],
        [{}, /Nothing to change/],
        [{ colour: 'red' }, /body.colour is not a known field/],
      ];
      for (const [payload, message] of cases)
        expectError(await patch(gw, id, payload), 400, 'invalid_request', message);
      const shown = (await gw.admin.inject({ url: `/admin/keys/${id}`, headers: admin })).json();
      expect(shown).toMatchObject({ plan: 'free', name: 'kept' });
      expect(shown).not.toHaveProperty('updatedAt');
    });

    it('keeps what a change leaves out: the expiry through a rename; refuses to drop an enterprise key’s limits', async () => {
      const gw = await start();
      const expiresAt = '2099-01-01T00:00:00.000Z';
      const { id } = await create(gw, { plan: 'enterprise', limits: { perMinute: 7, perDay: 70 }, expiresAt });
      expect((await patch(gw, id, { name: 'renamed' })).json()).toMatchObject({ name: 'renamed', expiresAt });
      expectError(await patch(gw, id, { limits: null }), 400, 'invalid_request', /enterprise keys need limits/);
      const shown = (await gw.admin.inject({ url: `/admin/keys/${id}`, headers: admin })).json();
      expect(shown).toMatchObject({ limits: { perMinute: 7, perDay: 70 }, expiresAt });
    });

    it('answers 404 for an unknown id, 409 for a revoked key', async () => {
      const gw = await start();
      expectError(await patch(gw, 'key_0000000000000000', { plan: 'pro' }), 404, 'not_found');
      const { id } = await create(gw, { plan: 'free' });
      await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${id}`, headers: admin });
      expectError(await patch(gw, id, { plan: 'pro' }), 409, 'conflict', /revoked/);
      expectError(await rotate(gw, id), 409, 'conflict', /revoked/);
    });

    it('leaves a ban in place', async () => {
      const gw = await start({ env: { BAN_THRESHOLD: '2', BAN_GRACE_MS: '0' } });
      const { id, key } = await create(gw, { plan: 'free' });
      await spend(gw, key, 60);
      for (let i = 0; i < 3; i++) await call(gw, key);
      expectError(await call(gw, key), 429, 'api_key_banned');
      expect((await patch(gw, id, { plan: 'business' })).statusCode).toBe(200);
      expectError(await call(gw, key), 429, 'api_key_banned');
      expect((await usage(gw, id)).ban).not.toBeNull();
    });
  });

  describe('expiry', () => {
    it('refuses a key from the moment it expires: 401 expired_api_key saying when, with per-address headers', async () => {
      const time = clock();
      const gw = await start({ now: time.now });
      const expiresAt = new Date(time.at + 10_000).toISOString();
      const { id, key } = await create(gw, { plan: 'pro', expiresAt });
      const shown = (await gw.admin.inject({ url: `/admin/keys/${id}`, headers: admin })).json();
      expect(shown.expiresAt).toBe(expiresAt);
      time.at += 9_999;
      expect((await call(gw, key)).statusCode).toBe(200);
      time.at += 1;
      const expired = await call(gw, key);
      expectError(expired, 401, 'expired_api_key', new RegExp(`expired at ${expiresAt.replace(/\./g, '\\.')}`));
      // Like any request without a usable key: the per-address limit's headers.
      expect(expired.headers['x-ratelimit-limit']).toBe('60');
      // Extending it brings it back at once on this replica.
      const later = new Date(time.at + 3_600_000).toISOString();
      expect((await patch(gw, id, { expiresAt: later })).json().expiresAt).toBe(later);
      expect((await call(gw, key)).statusCode).toBe(200);
      const cleared = await patch(gw, id, { expiresAt: null });
      expect(cleared.json()).not.toHaveProperty('expiresAt');
      time.at += 7_200_000;
      expect((await call(gw, key)).statusCode).toBe(200);
    });

    it('refuses an expiry at the present moment, and takes one a millisecond later', async () => {
      const time = clock();
      const gw = await start({ now: time.now });
      const now = new Date(time.at).toISOString();
      const refused = await gw.admin.inject({
        method: 'POST',
        url: '/admin/keys',
        headers: admin,
        payload: { plan: 'free', expiresAt: now },
      });
      expectError(refused, 400, 'invalid_request', /expiresAt must be in the future/);
      const next = new Date(time.at + 1).toISOString();
      const { id } = await create(gw, { plan: 'free', expiresAt: next });
      expect((await gw.admin.inject({ url: `/admin/keys/${id}`, headers: admin })).json().expiresAt).toBe(next);
    });

    it('refuses an expiry that is not in the future or not RFC 3339 at create, creating nothing', async () => {
      const gw = await start();
      const count = async () => (await gw.admin.inject({ url: '/admin/keys', headers: admin })).json().items.length;
      const before = await count();
      for (const expiresAt of ['2020-01-01T00:00:00Z', 'tomorrow', '2031-01-01', 12]) {
        const res = await gw.admin.inject({
          method: 'POST',
          url: '/admin/keys',
          headers: admin,
          payload: { plan: 'free', expiresAt },
        });
        expectError(res, 400, 'invalid_request', /expiresAt/);
      }
      expect(await count()).toBe(before);
    });
  });

  describe('POST /admin/keys/:id/rotate', () => {
    it('gives a new secret for the same id; both share one quota until the grace ends, then the old gets 401', async () => {
      const time = clock();
      const gw = await start({ now: time.now });
      const { id, key: old } = await create(gw, { plan: 'free', name: 'rotating' });
      await spend(gw, old, 10);
      const res = await rotate(gw, id, { gracePeriodSeconds: 60 });
      expect(res.statusCode, res.body).toBe(200);
      const rotated = res.json();
      expect(Object.keys(rotated).sort()).toEqual([
        'createdAt',
        'id',
        'key',
        'limits',
        'name',
        'plan',
        'previousKeyExpiresAt',
        'scopes',
      ]);
      expect(rotated).toMatchObject({ id, plan: 'free', name: 'rotating', limits: { perMinute: 60 } });
      expect(rotated.key).not.toBe(old);
      expect(rotated.previousKeyExpiresAt).toBe(new Date(time.at + 60_000).toISOString());

      // One count: 10 before, then old and new alternate.
      expect((await call(gw, rotated.key)).headers['x-ratelimit-remaining']).toBe('49');
      expect((await call(gw, old)).headers['x-ratelimit-remaining']).toBe('48');
      expect((await call(gw, rotated.key)).headers['x-ratelimit-remaining']).toBe('47');
      expect((await usage(gw, id)).windows.minute.used).toBe(13);

      time.at += 59_999;
      expect((await call(gw, old)).statusCode).toBe(200);
      time.at += 1;
      expectError(await call(gw, old), 401, 'expired_api_key', /replaced by a newer one/);
      expect((await call(gw, rotated.key)).statusCode).toBe(200);
    });

    it('keeps the old secret 86400 s by default; 0 ends it at once; more than 604800 is refused', async () => {
      const time = clock();
      const gw = await start({ now: time.now });
      const { id, key: first } = await create(gw, { plan: 'pro' });
      const byDefault = (await rotate(gw, id)).json();
      expect(byDefault.previousKeyExpiresAt).toBe(new Date(time.at + 86_400_000).toISOString());
      expect((await call(gw, first)).statusCode).toBe(200);
      const now = (await rotate(gw, id, { gracePeriodSeconds: 0 })).json();
      expect(now.previousKeyExpiresAt).toBe(new Date(time.at).toISOString());
      expectError(await call(gw, byDefault.key), 401, 'expired_api_key');
      expect((await call(gw, now.key)).statusCode).toBe(200);
      for (const gracePeriodSeconds of [-1, 604_801, 1.5, '60']) {
        expectError(await rotate(gw, id, { gracePeriodSeconds }), 400, 'invalid_request', /gracePeriodSeconds/);
      }
      expectError(await rotate(gw, 'key_0000000000000000'), 404, 'not_found');
    });

    it('a second rotation ends the older secret at once; revoking ends both', async () => {
      const gw = await start();
      const { id, key: first } = await create(gw, { plan: 'pro' });
      expect((await call(gw, first)).statusCode).toBe(200);
      const second = (await rotate(gw, id)).json().key;
      expect((await call(gw, first)).statusCode).toBe(200);
      const third = (await rotate(gw, id)).json().key;
      expectError(await call(gw, first), 401, 'invalid_api_key');
      expect((await call(gw, second)).statusCode).toBe(200);
      expect((await call(gw, third)).statusCode).toBe(200);
      await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${id}`, headers: admin });
      expectError(await call(gw, second), 401, 'invalid_api_key');
      expectError(await call(gw, third), 401, 'invalid_api_key');
    });

    it('shares one ban between the old and the new secret', async () => {
      const gw = await start({ env: { BAN_THRESHOLD: '2', BAN_GRACE_MS: '0' } });
      const { id, key: old } = await create(gw, { plan: 'free' });
      const fresh = (await rotate(gw, id)).json().key;
      await spend(gw, fresh, 60);
      for (let i = 0; i < 3; i++) await call(gw, old);
      expectError(await call(gw, fresh), 429, 'api_key_banned');
      expectError(await call(gw, old), 429, 'api_key_banned');
    });

    it('nothing revives a rotated-out secret: an expiry set, passed, then cleared leaves it refused', async () => {
      const time = clock();
      const gw = await start({ now: time.now });
      const { id, key: old } = await create(gw, { plan: 'pro' });
      const fresh = (await rotate(gw, id, { gracePeriodSeconds: 3600 })).json().key;
      expect((await call(gw, old)).statusCode).toBe(200);

      // The key is set to expire in 10 s, well inside the old secret's hour of grace.
      const soon = new Date(time.at + 10_000).toISOString();
      expect((await patch(gw, id, { expiresAt: soon })).statusCode).toBe(200);
      time.at += 10_000;
      expectError(await call(gw, old), 401, 'expired_api_key');
      expectError(await call(gw, fresh), 401, 'expired_api_key');

      // Clearing (or extending) the expiry brings back the key's current secret only.
      const cleared = await patch(gw, id, { expiresAt: null });
      expect(cleared.statusCode, cleared.body).toBe(200);
      expect(cleared.json().previousKeyExpiresAt).toBe(soon);
      expect((await call(gw, fresh)).statusCode).toBe(200);
      expectError(await call(gw, old), 401, 'expired_api_key', /replaced by a newer one/);
      expect((await patch(gw, id, { expiresAt: new Date(time.at + 7_200_000).toISOString() })).statusCode).toBe(200);
      expectError(await call(gw, old), 401, 'expired_api_key');
      time.at += 60_000;
      expectError(await call(gw, old), 401, 'expired_api_key');
      expect((await call(gw, fresh)).statusCode).toBe(200);
    });

    it('a secret never outlives its key: the grace ends with the key', async () => {
      const time = clock();
      const gw = await start({ now: time.now });
      const expiresAt = new Date(time.at + 30_000).toISOString();
      const { id } = await create(gw, { plan: 'pro', expiresAt });
      expect((await rotate(gw, id, { gracePeriodSeconds: 3600 })).json().previousKeyExpiresAt).toBe(expiresAt);
    });
  });

  describe('GET /admin/keys/:id/usage', () => {
    it('shows an unused key with empty windows that have not started', async () => {
      const gw = await start();
      const { id } = await create(gw, { plan: 'business' });
      expect(await usage(gw, id)).toEqual({
        id,
        plan: 'business',
        limits: { perMinute: 1000, perDay: 100_000 },
        windows: {
          minute: { limit: 1000, used: 0, remaining: 1000, resetAt: null },
          day: { limit: 100_000, used: 0, remaining: 100_000, resetAt: null },
        },
        ban: null,
        refusals: 0,
      });
    });

    it('says what the headers said, and reading it counts as no request', async () => {
      const gw = await start();
      const { id, key } = await create(gw, { plan: 'free' });
      const last = await spend(gw, key, 12);
      const first = await usage(gw, id);
      const second = await usage(gw, id);
      // resetAt is now + TTL, read a few ms apart; everything else is identical.
      const counts = ({ windows, ...rest }: Usage) => ({
        ...rest,
        minute: { ...windows.minute, resetAt: undefined },
        day: { ...windows.day, resetAt: undefined },
      });
      expect(counts(second)).toEqual(counts(first));
      expect(first.windows.minute).toMatchObject({ limit: 60, used: 12, remaining: 48 });
      expect(String(first.windows.minute.remaining)).toBe(last.headers['x-ratelimit-remaining']);
      expect(first.windows.day).toMatchObject({ limit: 1000, used: 12, remaining: 988 });
      // X-RateLimit-Reset is the binding (minute) window's reset, in whole seconds.
      const reset = Number(last.headers['x-ratelimit-reset']);
      expect(
        Math.abs(Math.ceil(Date.parse(first.windows.minute.resetAt as string) / 1000) - reset),
      ).toBeLessThanOrEqual(1);
      const policy = /"day";r=(\d+)/.exec(String(last.headers.ratelimit));
      expect(Number(policy?.[1])).toBe(first.windows.day.remaining);
      expect((await call(gw, key)).headers['x-ratelimit-remaining']).toBe('47');
    });

    it('counts refusals toward a ban, then shows the ban until it is lifted', async () => {
      const gw = await start({ env: { BAN_THRESHOLD: '3', BAN_GRACE_MS: '0' } });
      const { id, key } = await create(gw, { plan: 'free' });
      await spend(gw, key, 62);
      const limited = await usage(gw, id);
      expect(limited).toMatchObject({ refusals: 2, ban: null });
      expect(limited.windows.minute).toMatchObject({ used: 60, remaining: 0 });
      await spend(gw, key, 2);
      const banned = await usage(gw, id);
      expect(banned.ban?.until).toEqual(expect.any(String));
      expect(Date.parse(banned.ban?.until as string)).toBeGreaterThan(Date.now() + 800_000);
      expect(banned.refusals).toBe(0);
      await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${id}/ban`, headers: admin });
      expect((await usage(gw, id)).ban).toBeNull();
    });

    it('answers 404 for an unknown id', async () => {
      const gw = await start();
      expectError(
        await gw.admin.inject({ url: '/admin/keys/key_0000000000000000/usage', headers: admin }),
        404,
        'not_found',
      );
    });
  });
});

describe('audit', () => {
  it('logs one info line per admin change naming the action, key id and fields, never a secret, and counts it', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ logs });
    const created = await create(gw, { plan: 'free', name: 'audited' });
    await patch(gw, created.id, { plan: 'pro', name: 'renamed' });
    const rotated = (await rotate(gw, created.id)).json();
    await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${created.id}/ban`, headers: admin });
    await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${created.id}`, headers: admin });
    // Reading changes nothing and is not audited.
    await usage(gw, created.id);

    const audits = logs.filter((l) => l.audit);
    expect(audits.map((l) => [l.audit, l.keyId, l.level])).toEqual([
      ['key.created', created.id, 30],
      ['key.updated', created.id, 30],
      ['key.rotated', created.id, 30],
      ['key.ban_lifted', created.id, 30],
      ['key.revoked', created.id, 30],
    ]);
    expect(audits[1]).toMatchObject({ changed: ['plan', 'name'], from: 'free', to: 'pro' });
    const all = JSON.stringify(logs);
    for (const secret of [created.key, rotated.key, ADMIN_TOKEN]) expect(all).not.toContain(secret);

    const metrics = await gw.deps.registry.metrics();
    for (const action of ['key.created', 'key.updated', 'key.rotated', 'key.ban_lifted', 'key.revoked']) {
      expect(metrics).toMatch(new RegExp(`gateway_admin_actions_total\\{action="${action}"[^}]*\\} 1\\n`));
    }
  });
});

describe('keys from API_KEYS_FILE', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lifecycle-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('a gateway refuses to start with an invalid API_KEYS_FILE, naming the problems', async () => {
    const path = join(dir, 'bad.json');
    await writeFile(
      path,
      JSON.stringify([
        { id: 'key_a', plan: 'free', sha256: 'not-a-hash' },
        { id: 'key_b', plan: 'enterprise', sha256: hashApiKey('b') },
      ]),
    );
    // With every other problem of the configuration, in one list.
    expect(() => loadConfig({ LOG_LEVEL: 'loud', API_KEYS_FILE: path })).toThrow(
      new ConfigError([
        `API_KEYS_FILE=${path}: entry 0: sha256 must be 64 lowercase hex characters`,
        `API_KEYS_FILE=${path}: entry 1: enterprise keys need limits { perSecond, perMinute, perHour, perDay, perMonth }`,
        'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"',
      ]),
    );
    await expect(startGateway({ env: { API_KEYS_FILE: path } })).rejects.toThrow(path);
  });

  it('a gateway refuses to start when API_KEYS_FILE is missing or not JSON', async () => {
    const missing = join(dir, 'missing.json');
    expect(() => loadConfig({ API_KEYS_FILE: missing })).toThrow(`API_KEYS_FILE=${missing} cannot be read (ENOENT)`);
    const garbled = join(dir, 'garbled.json');
    await writeFile(garbled, '[{');
    expect(() => loadConfig({ API_KEYS_FILE: garbled })).toThrow(`API_KEYS_FILE=${garbled} is not valid JSON`);
  });

  it('a gateway started on a valid file serves its keys and lists them', async () => {
    const path = join(dir, 'good.json');
    const key = generateApiKey();
    await writeFile(path, JSON.stringify([{ id: 'key_good', plan: 'pro', sha256: hashApiKey(key) }]));
    const gw = await startGateway({ env: { API_KEYS_FILE: path } });
    try {
      // No upstream here: a known key passes the gate and reaches the (absent) upstream, a 503, not a 401.
      const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
      expect(res.json().code).toBe('upstream_unavailable');
      expect(res.headers['x-ratelimit-limit']).toBe('300');
      const list = await gw.admin.inject({ url: '/admin/keys', headers: bearer(ADMIN_TOKEN) });
      expect(list.json().items).toEqual([expect.objectContaining({ id: 'key_good', source: 'file', plan: 'pro' })]);
    } finally {
      await gw.close();
    }
  });

  it('a key from the file works until its expiresAt, then gets 401 expired_api_key naming that moment', async () => {
    const time = clock();
    const expiresAt = new Date(time.at + 30_000).toISOString();
    const { key, record } = createKey({ plan: 'free', expiresAt });
    const file = join(dir, 'expiring.json');
    await writeFile(file, JSON.stringify([toKeyFileEntry(record)]));
    const gw = await gateways.start({ now: time.now, env: { API_KEYS_FILE: file } });
    expect((await call(gw, key)).statusCode).toBe(200);
    time.at += 29_999;
    expect((await call(gw, key)).statusCode).toBe(200);
    time.at += 1;
    const expired = await call(gw, key);
    expectError(expired, 401, 'expired_api_key');
    expect(expired.json().message).toBe(`This API key expired at ${expiresAt}`);
  });

  it('honour expiresAt and a previous secret, and cannot be changed through the admin API', async () => {
    const time = clock();
    const current = createKey({ plan: 'pro', expiresAt: new Date(time.at + 120_000).toISOString() });
    const previous = newSecret();
    const file = join(dir, 'keys.json');
    const entry = toKeyFileEntry({
      ...current.record,
      previous: { sha256: previous.sha256, expiresAt: new Date(time.at + 60_000).toISOString() },
    });
    await writeFile(file, JSON.stringify([entry]));
    const gw = await gateways.start({ now: time.now, env: { API_KEYS_FILE: file } });
    expect((await call(gw, current.key)).statusCode).toBe(200);
    expect((await call(gw, previous.key)).headers['x-ratelimit-remaining']).toBe('298');
    time.at += 60_000;
    expectError(await call(gw, previous.key), 401, 'expired_api_key');
    expect((await call(gw, current.key)).statusCode).toBe(200);
    time.at += 60_000;
    expectError(await call(gw, current.key), 401, 'expired_api_key');

    const id = current.record.id;
    expectError(await patch(gw, id, { plan: 'free' }), 409, 'conflict', /API_KEYS_FILE/);
    expectError(await rotate(gw, id), 409, 'conflict', /API_KEYS_FILE/);
    expect((await usage(gw, id)).windows.minute.used).toBe(3);
    const shown = (await gw.admin.inject({ url: `/admin/keys/${id}`, headers: admin })).json();
    expect(shown).toMatchObject({
      source: 'file',
      expiresAt: entry.expiresAt,
      previousKeyExpiresAt: entry.previous?.expiresAt,
    });
  });
});
