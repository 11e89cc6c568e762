import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { InjectOptions } from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createKey } from '../../src/keys/create-key.js';
import type { KeyRecord } from '../../src/keys/key-store.js';
import { ADMIN_TOKEN, bearer, type TestGateway, useGateways } from '../support/helpers.js';
import { startReceiver } from '../support/webhook-receiver.js';

const gateways = useGateways();
const receivers: Array<Awaited<ReturnType<typeof startReceiver>>> = [];
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});
const dir = mkdtempSync(join(tmpdir(), 'plans-'));
let files = 0;

/** Writes a PLANS_FILE and returns its path. */
function plansFile(content: unknown): string {
  const path = join(dir, `plans-${files++}.json`);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

const PLANS = {
  plans: {
    free: { windows: { minute: 60, day: 1000 }, algorithm: 'sliding' },
    reader: { windows: { second: 5, minute: 100, month: 100000 }, scopes: ['pets:read'] },
    trial: { windows: { minute: 6, day: 1000 }, shadow: true },
    metered: {
      windows: { minute: 12, day: 1000 },
      price: { currency: 'EUR', base: 4900, includedUnits: 100000, unitPrice: 50, per: 1000 },
    },
    enterprise: {},
  },
  routeCosts: { 'POST /v1/pets': 5 },
};

async function withPlans(env: Record<string, string> = {}): Promise<TestGateway> {
  return gateways.start({ env: { PLANS_FILE: plansFile(PLANS), BAN_GRACE_MS: '0', ...env } });
}

async function addKey(gw: TestGateway, fields: Partial<KeyRecord> & { plan: string }) {
  const { key, record } = createKey({ name: 'test', ...fields });
  await gw.deps.keyStore.insert(record);
  return { key, id: record.id };
}

const post = (key: string, remoteAddress?: string) => ({
  method: 'POST' as const,
  url: '/v1/pets',
  headers: { ...bearer(key), 'content-type': 'application/json' },
  payload: { name: 'Rex', categoryId: 1 },
  ...(remoteAddress ? { remoteAddress } : {}),
});

describe('plans as data (PLANS_FILE)', () => {
  it('lists the plans in force and the route costs at GET /admin/plans', async () => {
    const gw = await withPlans();
    const res = await gw.admin.inject({ url: '/admin/plans', headers: bearer(ADMIN_TOKEN) });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.shadow).toBe(false);
    expect(body.routeCosts).toEqual({ 'POST /v1/pets': 5 });
    expect(body.plans).toEqual([
      {
        name: 'free',
        windows: { minute: 60, day: 1000 },
        algorithm: 'sliding',
        scopes: ['pets:read', 'pets:write'],
        shadow: false,
      },
      {
        name: 'reader',
        windows: { second: 5, minute: 100, month: 100000 },
        algorithm: 'fixed',
        scopes: ['pets:read'],
        shadow: false,
      },
      {
        name: 'trial',
        windows: { minute: 6, day: 1000 },
        algorithm: 'fixed',
        scopes: ['pets:read', 'pets:write'],
        shadow: true,
      },
      {
        name: 'metered',
        windows: { minute: 12, day: 1000 },
        algorithm: 'fixed',
        scopes: ['pets:read', 'pets:write'],
        shadow: false,
        price: { currency: 'EUR', base: 4900, includedUnits: 100000, unitPrice: 50, per: 1000 },
      },
      { name: 'enterprise', windows: null, algorithm: 'fixed', scopes: ['pets:read', 'pets:write'], shadow: false },
    ]);
  });

  it('lists the spec’s four plans without PLANS_FILE', async () => {
    const gw = await gateways.start();
    const res = await gw.admin.inject({ url: '/admin/plans', headers: bearer(ADMIN_TOKEN) });
    expect(res.json().plans.map((p: { name: string; windows: unknown }) => [p.name, p.windows])).toEqual([
      ['free', { minute: 60, day: 1000 }],
      ['pro', { minute: 300, day: 10000 }],
      ['business', { minute: 1000, day: 100000 }],
      ['enterprise', null],
    ]);
  });

  it('reports every window of a plan in RateLimit-Policy and RateLimit, the binding one in X-RateLimit-*', async () => {
    const gw = await withPlans();
    const { key } = await addKey(gw, { plan: 'reader' });
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expect(res.statusCode).toBe(200);
    const month = Number(/"month";q=100000;w=(\d+)/.exec(String(res.headers['ratelimit-policy']))?.[1]);
    expect([28, 29, 30, 31].map((d) => d * 86_400)).toContain(month);
    expect(res.headers['ratelimit-policy']).toBe(`"second";q=5;w=1, "minute";q=100;w=60, "month";q=100000;w=${month}`);
    expect(res.headers.ratelimit).toMatch(/^"second";r=4;t=\d+, "minute";r=99;t=\d+, "month";r=99999;t=\d+$/);
    expect(res.headers['x-ratelimit-limit']).toBe('5');
    expect(res.headers['x-ratelimit-remaining']).toBe('4');
  });

  it('takes a route’s cost from every window and refuses a request costing more than remains, taking nothing', async () => {
    const gw = await withPlans();
    const { key, id } = await addKey(gw, { plan: 'metered' });
    for (const remaining of [7, 2]) {
      const res = await gw.app.inject(post(key));
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-ratelimit-remaining']).toBe(String(remaining));
    }
    const refused = await gw.app.inject(post(key));
    expect(refused.statusCode).toBe(429);
    expect(refused.json().code).toBe('rate_limit_exceeded');
    expect(refused.headers['x-ratelimit-remaining']).toBe('2');
    // A GET costs 1: it fits what the refused POST left.
    const read = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expect(read.statusCode).toBe(200);
    expect(read.headers['x-ratelimit-remaining']).toBe('1');
    const usage = await gw.admin.inject({ url: `/admin/keys/${id}/usage`, headers: bearer(ADMIN_TOKEN) });
    expect(usage.json().windows.minute).toMatchObject({ limit: 12, used: 11, remaining: 1 });
    expect(usage.json().windows.day).toMatchObject({ limit: 1000, used: 11 });
  });

  it('names the window that refused and when it lets requests through, for every kind of window', async () => {
    // A fixed clock within the current second, so each reset is known to the millisecond; the
    // embedded limiter keeps to it (Redis's own expiry runs on Redis's clock). Both limiters
    // settle a refusal in the same code.
    const at = Math.floor(Date.now() / 1000) * 1000 + 250;
    const gw = await gateways.start({
      redisUrl: null,
      now: () => at,
      env: {
        BAN_GRACE_MS: '0',
        PLANS_FILE: plansFile({
          plans: {
            burst: { windows: { second: 5, minute: 100 } },
            hourly: { windows: { hour: 5 } },
            smooth: { windows: { minute: 5 }, algorithm: 'sliding' },
            daily: { windows: { day: 5 } },
            monthly: { windows: { month: 5 } },
            metered: { windows: { minute: 12, day: 1000 } },
          },
          routeCosts: { 'POST /v1/pets': 5 },
        }),
      },
    });
    const iso = (ms: number) => new Date(ms).toISOString();
    const day = new Date(at);
    const nextMonth = Date.UTC(day.getUTCFullYear(), day.getUTCMonth() + 1, 1);
    const refusal = async (plan: string, request: (key: string) => InjectOptions) => {
      const { key } = await addKey(gw, { plan });
      let res = await gw.app.inject(request(key));
      while (res.statusCode === 200) res = await gw.app.inject(request(key));
      expect(res.statusCode).toBe(429);
      return { message: res.json().message as string, retryAfter: Number(res.headers['retry-after']) };
    };
    const get = (key: string) => ({ url: '/v1/pets', headers: bearer(key) });
    expect(await refusal('burst', get)).toEqual({
      message: `Rate limit exceeded for the burst plan: the second window (5 per second) is used up; it resets on ${iso(at + 1000)}`,
      // Retry-After never says less than RETRY_AFTER_MIN_SECONDS (8), whatever the window: see Bans.
      retryAfter: 8,
    });
    expect(await refusal('hourly', get)).toEqual({
      message: `Rate limit exceeded for the hourly plan: the hour window (5 per hour) is used up; it resets on ${iso(at + 3_600_000)}`,
      retryAfter: 3600,
    });
    // Sliding: the second-long bucket holding all five requests leaves the minute a bucket late.
    const slidOut = (Math.floor(at / 1000) + 61) * 1000;
    expect(await refusal('smooth', get)).toEqual({
      message: `Rate limit exceeded for the smooth plan: the sliding minute window (5 in any minute) is used up; it has room again from ${iso(slidOut)}`,
      retryAfter: Math.ceil((slidOut - at) / 1000),
    });
    const midnight = (Math.floor(at / 86_400_000) + 1) * 86_400_000;
    expect(await refusal('daily', get)).toEqual({
      message: `Rate limit exceeded for the daily plan: the day quota (5 per UTC day) is used up; it resets on ${iso(midnight)}`,
      retryAfter: Math.ceil((midnight - at) / 1000),
    });
    expect(await refusal('monthly', get)).toEqual({
      message: `Rate limit exceeded for the monthly plan: the month quota (5 per UTC calendar month) is used up; it resets on ${iso(nextMonth)}`,
      retryAfter: Math.ceil((nextMonth - at) / 1000),
    });
    // Two POSTs at 5 leave 2 of 12: the third is refused for its cost, not for an empty window.
    expect(await refusal('metered', post)).toEqual({
      message: `Rate limit exceeded for the metered plan: the minute window (12 per minute) has 2 left and this request costs 5; it resets on ${iso(at + 60_000)}`,
      retryAfter: 60,
    });
  });

  it('counts a costly request at its route’s cost for quota webhooks: a POST costing 5 from 78 to 83 of a day of 100 crosses 80 %', async () => {
    const hook = await startReceiver();
    receivers.push(hook);
    const gw = await withPlans({ WEBHOOKS_ALLOW_INSECURE: 'true', WEBHOOKS_ALLOW_PRIVATE: 'true' });
    const subscribed = await gw.admin.inject({
      method: 'POST',
      url: '/admin/webhooks',
      headers: bearer(ADMIN_TOKEN),
      payload: { url: hook.url, events: ['key.quota.warning', 'key.quota.exhausted'] },
    });
    expect(subscribed.statusCode, subscribed.body).toBe(201);
    const { key, id } = await addKey(gw, { plan: 'enterprise', limits: { perMinute: 1000, perDay: 100 } });
    const read = async () =>
      expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode).toBe(200);
    for (let i = 0; i < 78; i++) await read();
    expect((await gw.app.inject(post(key))).statusCode).toBe(200);
    // On to 100 of 100, one unit at a time: the exhaustion notice comes after any warning.
    for (let i = 83; i < 100; i++) await read();
    while (!hook.events().some((e) => e.type === 'key.quota.exhausted')) await hook.until(hook.received.length + 1);
    await vi.waitFor(async () => expect((await gw.deps.webhooks.queue.stats()).depth).toBe(0), { interval: 20 });
    const notices = hook.events().map((e) => [e.type, e.data.keyId, e.data.used, e.data.threshold]);
    expect(notices.sort((a, b) => Number(a[3]) - Number(b[3]))).toEqual([
      ['key.quota.warning', id, 83, 80],
      ['key.quota.exhausted', id, 100, 100],
    ]);
  });

  it('shows every window in a key’s usage, a month among them', async () => {
    const gw = await withPlans();
    const { key, id } = await addKey(gw, { plan: 'reader' });
    await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    const usage = (await gw.admin.inject({ url: `/admin/keys/${id}/usage`, headers: bearer(ADMIN_TOKEN) })).json();
    expect(Object.keys(usage.windows)).toEqual(['second', 'minute', 'month']);
    expect(usage.windows.month).toMatchObject({ limit: 100000, used: 1, remaining: 99999 });
    const now = new Date();
    expect(usage.windows.month.resetAt).toBe(
      new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString(),
    );
  });

  it('lets a key override its plan’s windows, and refuses limits that would put a longer window below a shorter', async () => {
    const gw = await withPlans();
    const auth = { headers: bearer(ADMIN_TOKEN) };
    const created = await gw.admin.inject({
      method: 'POST',
      url: '/admin/keys',
      ...auth,
      payload: { plan: 'free', limits: { perMinute: 100, perMonth: 20000 } },
    });
    expect(created.statusCode).toBe(201);
    expect(created.json().limits).toEqual({ perMinute: 100, perDay: 1000, perMonth: 20000 });
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(created.json().key) });
    expect(res.headers['ratelimit-policy']).toMatch(
      /^"minute";q=100;w=60, "day";q=1000;w=86400, "month";q=20000;w=\d+$/,
    );
    const wrong = await gw.admin.inject({
      method: 'POST',
      url: '/admin/keys',
      ...auth,
      payload: { plan: 'free', limits: { perDay: 10 } },
    });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json().message).toBe('limits.perMinute cannot exceed limits.perDay');
    const unknown = await gw.admin.inject({ method: 'POST', url: '/admin/keys', ...auth, payload: { plan: 'pro' } });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().message).toBe('plan must be one of free, reader, trial, metered, enterprise');
  });

  it('fails the requests of a stored key whose plan the file dropped, saying why, until it is moved', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ env: { PLANS_FILE: plansFile(PLANS) }, logs });
    const { key, id } = await addKey(gw, { plan: 'pro' });
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expect(res.statusCode).toBe(500);
    expect(res.json().code).toBe('internal_error');
    expect(JSON.stringify(logs)).toContain("the key's plan pro is not in force");
    const shown = await gw.admin.inject({ url: `/admin/keys/${id}`, headers: bearer(ADMIN_TOKEN) });
    expect(shown.statusCode).toBe(200);
    const moved = await gw.admin.inject({
      method: 'PATCH',
      url: `/admin/keys/${id}`,
      headers: bearer(ADMIN_TOKEN),
      payload: { plan: 'metered' },
    });
    expect(moved.statusCode).toBe(200);
    expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode).toBe(200);
  });

  it('refuses to start on a plans file with problems, listing every one', () => {
    const path = plansFile({
      plans: {
        free: { windows: { minute: 60, week: 5 } },
        'Bad Name': {},
        slow: { windows: { minute: 100, hour: 50 }, algorithm: 'leaky' },
        narrow: { windows: { second: 2 }, scopes: ['pets:delete'] },
        tiny: { windows: { second: 2 } },
      },
      routeCosts: { 'DELETE /v1/pets': 2, 'POST /v1/pets': 3 },
    });
    let message = '';
    try {
      loadConfig({ PLANS_FILE: path });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('plans.free.windows: unknown window "week" (second, minute, hour, day, month)');
    expect(message).toContain('plan name "Bad Name"');
    expect(message).toContain('plans.slow.algorithm must be fixed or sliding');
    expect(message).toContain('plans.narrow.scopes may hold only pets:read, pets:write');
    expect(message).toContain('routeCosts: no route "DELETE /v1/pets"');
    expect(message).toContain(
      'routeCosts["POST /v1/pets"] is 3, more than the tiny plan\'s second limit of 2: its keys could never make that request',
    );
  });

  it('refuses to start on a plans file that is not JSON, or that cannot be read', () => {
    expect(() => loadConfig({ PLANS_FILE: plansFile('{ "plans": ') })).toThrow(/PLANS_FILE=.* is not valid JSON/);
    expect(() => loadConfig({ PLANS_FILE: join(dir, 'missing.json') })).toThrow(
      /PLANS_FILE=.*missing\.json cannot be read/,
    );
  });
});

describe('scopes', () => {
  it('refuses a POST by a read-only key: 403 insufficient_scope naming the scope, no quota taken, headers set', async () => {
    const gw = await withPlans();
    const { key, id } = await addKey(gw, { plan: 'reader' });
    const res = await gw.app.inject(post(key));
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({
      code: 'insufficient_scope',
      message: expect.stringContaining('pets:write'),
      status: 403,
    });
    expect(res.headers['www-authenticate']).toBe(
      'Bearer realm="animal-store", error="insufficient_scope", scope="pets:write"',
    );
    expect(res.headers['x-ratelimit-remaining']).toBe('5');
    expect(res.headers.ratelimit).toMatch(/^"second";r=5;/);
    const usage = (await gw.admin.inject({ url: `/admin/keys/${id}/usage`, headers: bearer(ADMIN_TOKEN) })).json();
    expect(usage.windows.minute.used).toBe(0);
    expect(usage.refusals).toBe(0);
    expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode).toBe(200);
  });

  it('applies a key’s own scopes over its plan’s, set and cleared through the admin API', async () => {
    const gw = await withPlans();
    const auth = { headers: bearer(ADMIN_TOKEN) };
    const created = await gw.admin.inject({
      method: 'POST',
      url: '/admin/keys',
      ...auth,
      payload: { plan: 'free', scopes: ['pets:read'] },
    });
    const { id, key } = created.json();
    expect(created.json().scopes).toEqual(['pets:read']);
    expect((await gw.app.inject(post(key))).statusCode).toBe(403);
    const cleared = await gw.admin.inject({
      method: 'PATCH',
      url: `/admin/keys/${id}`,
      ...auth,
      payload: { scopes: null },
    });
    expect(cleared.json().scopes).toEqual(['pets:read', 'pets:write']);
    expect((await gw.app.inject(post(key))).statusCode).toBe(200);
    const readOnly = await gw.admin.inject({
      method: 'PATCH',
      url: `/admin/keys/${id}`,
      ...auth,
      payload: { scopes: ['pets:read'] },
    });
    expect(readOnly.json().scopes).toEqual(['pets:read']);
    const none = await gw.admin.inject({ method: 'PATCH', url: `/admin/keys/${id}`, ...auth, payload: { scopes: [] } });
    expect(none.statusCode).toBe(200);
    expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode).toBe(403);
    const bad = await gw.admin.inject({
      method: 'PATCH',
      url: `/admin/keys/${id}`,
      ...auth,
      payload: { scopes: ['pets:delete'] },
    });
    expect(bad.statusCode).toBe(400);
  });

  it('refuses a banned key a scope it lacks with 403, its headers reporting the ban, logged as forbidden', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({
      env: { PLANS_FILE: plansFile(PLANS), BAN_GRACE_MS: '0', BAN_THRESHOLD: '1', BAN_SECONDS: '120' },
      logs,
    });
    const { key } = await addKey(gw, { plan: 'metered', scopes: ['pets:read'] });
    const codes: string[] = [];
    for (let i = 0; i < 15 && codes.at(-1) !== 'api_key_banned'; i++) {
      const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
      codes.push(res.statusCode === 200 ? 'ok' : res.json().code);
    }
    expect(codes.at(-1)).toBe('api_key_banned');
    const res = await gw.app.inject(post(key));
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe('insufficient_scope');
    expect(res.headers['x-ratelimit-remaining']).toBe('0');
    expect(res.headers['ratelimit-policy']).toMatch(/, "ban";q=0;w=120$/);
    expect(res.headers.ratelimit).toMatch(/, "ban";r=0;t=\d+$/);
    const line = logs.find((l) => l.msg === 'request' && l.status === 403);
    expect(line?.limiter).toBe('forbidden');
  });

  it('refuses a scope a key lacks with 403 while the limiter is unavailable (closed mode), nothing remaining until the retry in 5 s', async () => {
    const { RedisProcess } = await import('@animal-store/tests/support/redis.js');
    const own = await RedisProcess.start();
    const at = Date.UTC(2026, 10, 24, 12, 0, 0, 250);
    const gw = await gateways.start({
      redisUrl: own.url,
      now: () => at,
      env: { PLANS_FILE: plansFile(PLANS), RATE_LIMIT_FAILURE_MODE: 'closed' },
    });
    await own.kill();
    const { key } = await addKey(gw, { plan: 'metered', scopes: ['pets:read'] });
    const res = await gw.app.inject(post(key));
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe('insufficient_scope');
    expect(res.headers['x-ratelimit-limit']).toBe('12');
    expect(res.headers['x-ratelimit-remaining']).toBe('0');
    expect(res.headers['x-ratelimit-reset']).toBe(String(Math.ceil((at + 5_000) / 1000)));
  });
});

describe('IP allowlists', () => {
  it.each([
    ['an IPv4 CIDR', ['203.0.113.0/24'], '203.0.113.9', '198.51.100.7'],
    // The edges of the prefix: its last address, and one differing only in the prefix's last bit.
    ['an IPv4 CIDR at its edge', ['203.0.113.0/24'], '203.0.113.255', '203.0.112.255'],
    ['an IPv6 CIDR', ['2001:db8::/32'], '2001:db8:1::5', '2001:db9::5'],
    ['an IPv4 address, used over IPv6-mapped IPv4', ['203.0.113.9'], '::ffff:203.0.113.9', '::ffff:203.0.113.10'],
    ['an IPv6 address, its one host', ['2001:db8::9'], '2001:db8::9', '2001:db8::10'],
  ])('serves a key only from its allowed addresses: %s', async (_label, cidrs, inside, outside) => {
    const gw = await withPlans();
    const { key, id } = await addKey(gw, { plan: 'free', allowedCidrs: cidrs });
    const ok = await gw.app.inject({ url: '/v1/pets', headers: bearer(key), remoteAddress: inside });
    expect(ok.statusCode).toBe(200);
    const refused = await gw.app.inject({ url: '/v1/pets', headers: bearer(key), remoteAddress: outside });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().code).toBe('ip_not_allowed');
    // An IPv6-mapped IPv4 client is named by its IPv4 address.
    expect(refused.json().message).toBe(`This API key may not be used from ${outside.replace('::ffff:', '')}`);
    expect(refused.headers['x-ratelimit-remaining']).toBe('59');
    const usage = (await gw.admin.inject({ url: `/admin/keys/${id}/usage`, headers: bearer(ADMIN_TOKEN) })).json();
    expect(usage.windows.minute.used).toBe(1);
  });

  it('takes CIDRs on create and PATCH, normalised, and refuses what is not one', async () => {
    const gw = await withPlans();
    const auth = { headers: bearer(ADMIN_TOKEN) };
    const created = await gw.admin.inject({
      method: 'POST',
      url: '/admin/keys',
      ...auth,
      payload: { plan: 'free', allowedCidrs: ['2001:DB8::/32', '203.0.113.9'] },
    });
    expect(created.statusCode).toBe(201);
    const { id } = created.json();
    const shown = (await gw.admin.inject({ url: `/admin/keys/${id}`, ...auth })).json();
    expect(shown.allowedCidrs).toEqual(['2001:db8::/32', '203.0.113.9/32']);
    for (const bad of ['203.0.113.0/33', 'example.com', '10.0.0.0/8/1']) {
      const res = await gw.admin.inject({
        method: 'PATCH',
        url: `/admin/keys/${id}`,
        ...auth,
        payload: { allowedCidrs: [bad] },
      });
      expect(res.statusCode, bad).toBe(400);
      expect(res.json().message).toContain(`allowedCidrs: ${JSON.stringify(bad)}`);
    }
    const changed = await gw.admin.inject({
      method: 'PATCH',
      url: `/admin/keys/${id}`,
      ...auth,
      payload: { allowedCidrs: ['198.51.100.0/24'] },
    });
    expect(changed.json().allowedCidrs).toEqual(['198.51.100.0/24']);
    const cleared = await gw.admin.inject({
      method: 'PATCH',
      url: `/admin/keys/${id}`,
      ...auth,
      payload: { allowedCidrs: null },
    });
    expect(cleared.statusCode).toBe(200);
    expect(cleared.json().allowedCidrs).toBeUndefined();
  });

  it('serves a key whose allowlist was set to an empty list from any address', async () => {
    const gw = await withPlans();
    const { key, id } = await addKey(gw, { plan: 'free', allowedCidrs: ['203.0.113.9'] });
    const patched = await gw.admin.inject({
      method: 'PATCH',
      url: `/admin/keys/${id}`,
      headers: bearer(ADMIN_TOKEN),
      payload: { allowedCidrs: [] },
    });
    expect(patched.statusCode).toBe(200);
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key), remoteAddress: '198.51.100.7' });
    expect(res.statusCode).toBe(200);
  });
});

describe('shadow mode', () => {
  it('refuses nothing on a shadow plan, counts and logs would-be refusals, and reports the true remaining', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({
      env: { PLANS_FILE: plansFile(PLANS), BAN_GRACE_MS: '0', BAN_THRESHOLD: '2' },
      logs,
    });
    const { key } = await addKey(gw, { plan: 'trial' });
    const statuses: number[] = [];
    const remaining: string[] = [];
    for (let i = 0; i < 10; i++) {
      const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
      statuses.push(res.statusCode);
      remaining.push(String(res.headers['x-ratelimit-remaining']));
    }
    expect(statuses).toEqual(Array(10).fill(200));
    expect(remaining).toEqual(['5', '4', '3', '2', '1', '0', '0', '0', '0', '0']);
    const metrics = await gw.deps.registry.getSingleMetricAsString('gateway_rate_limit_decisions_total');
    expect(metrics).toMatch(
      /^gateway_rate_limit_decisions_total\{(?=[^}]*decision="shadow_refused")(?=[^}]*source="shared")[^}]*\} 4$/m,
    );
    const marked = logs.filter((l) => l.msg === 'request' && l.limiter === 'shadow_refused');
    expect(marked).toHaveLength(4);
  });

  it('serves a banned key once its plan is in shadow mode, its headers still reporting the ban', async () => {
    const gw = await withPlans({ BAN_THRESHOLD: '1', BAN_SECONDS: '120' });
    const { key, id } = await addKey(gw, { plan: 'metered' });
    const codes: string[] = [];
    for (let i = 0; i < 15 && codes.at(-1) !== 'api_key_banned'; i++) {
      const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
      codes.push(res.statusCode === 200 ? 'ok' : res.json().code);
    }
    expect(codes.at(-1)).toBe('api_key_banned');
    const moved = await gw.admin.inject({
      method: 'PATCH',
      url: `/admin/keys/${id}`,
      headers: bearer(ADMIN_TOKEN),
      payload: { plan: 'trial' },
    });
    expect(moved.statusCode).toBe(200);
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-ratelimit-remaining']).toBe('0');
    expect(res.headers['ratelimit-policy']).toMatch(/, "ban";q=0;w=120$/);
  });

  it('serves a banned key on a replica started with RATE_LIMIT_SHADOW=true, counted as shadow_refused', async () => {
    // An operator turning shadow mode on for the whole deployment while a key is banned (in Redis):
    // the replica in shadow serves it and says what it would have done; one not in shadow refuses.
    const env = { PLANS_FILE: plansFile(PLANS), BAN_GRACE_MS: '0', BAN_THRESHOLD: '1', BAN_SECONDS: '120' };
    const prefix = `shadowban${Date.now()}:`;
    const strict = await gateways.start({ env, prefix });
    const { key } = await addKey(strict, { plan: 'metered' });
    let code = '';
    for (let i = 0; i < 15 && code !== 'api_key_banned'; i++) {
      const res = await strict.app.inject({ url: '/v1/pets', headers: bearer(key) });
      code = res.statusCode === 200 ? 'ok' : res.json().code;
    }
    expect(code).toBe('api_key_banned');
    const logs: Record<string, unknown>[] = [];
    const shadow = await gateways.start({
      env: { ...env, RATE_LIMIT_SHADOW: 'true' },
      prefix,
      keyStore: strict.deps.keyStore,
      logs,
    });
    const res = await shadow.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expect(res.statusCode).toBe(200);
    expect(res.headers['retry-after']).toBeUndefined();
    expect(res.headers['x-ratelimit-remaining']).toBe('0');
    expect(res.headers['ratelimit-policy']).toMatch(/, "ban";q=0;w=120$/);
    const metrics = await shadow.deps.registry.getSingleMetricAsString('gateway_rate_limit_decisions_total');
    expect(metrics).toMatch(/^gateway_rate_limit_decisions_total\{[^}]*decision="shadow_refused"[^}]*\} 1$/m);
    expect(metrics).not.toMatch(/decision="banned"/);
    expect(logs.filter((l) => l.msg === 'request' && l.limiter === 'shadow_refused')).toHaveLength(1);
    expect((await strict.app.inject({ url: '/v1/pets', headers: bearer(key) })).json().code).toBe('api_key_banned');
  });

  it('reports a shadow plan’s would-be limit refusal with its windows alone, no ban', async () => {
    const gw = await withPlans();
    const { key } = await addKey(gw, { plan: 'trial' });
    for (let i = 0; i < 6; i++) await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-ratelimit-remaining']).toBe('0');
    expect(res.headers['ratelimit-policy']).toBe('"minute";q=6;w=60, "day";q=1000;w=86400');
    expect(Number(res.headers['x-ratelimit-reset'])).toBeGreaterThan(0);
  });

  it('RATE_LIMIT_SHADOW=true puts every plan in shadow mode', async () => {
    const gw = await withPlans({ RATE_LIMIT_SHADOW: 'true', BAN_THRESHOLD: '1' });
    const { key } = await addKey(gw, { plan: 'metered' });
    const statuses: number[] = [];
    for (let i = 0; i < 16; i++)
      statuses.push((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode);
    expect(statuses).toEqual(Array(16).fill(200));
    const plans = (await gw.admin.inject({ url: '/admin/plans', headers: bearer(ADMIN_TOKEN) })).json();
    expect(plans.shadow).toBe(true);
    expect(plans.plans.every((p: { shadow: boolean }) => p.shadow)).toBe(true);
  });
});
