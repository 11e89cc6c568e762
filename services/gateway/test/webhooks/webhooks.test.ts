import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createKey } from '../../src/keys/create-key.js';
import { toKeyFileEntry } from '../../src/keys/keys-file.js';
import { DAY_MS } from '../../src/usage/usage-history.js';
import { ADMIN_TOKEN, addKey, bearer, startGateway, type TestGateway, useGateways } from '../support/helpers.js';
import { testClock } from '../support/test-clock.js';
import { type Received, startReceiver } from '../support/webhook-receiver.js';

/**
 * Webhooks end to end: a real receiver on loopback, deliveries through the queue (BullMQ on Redis,
 * or memory), signatures checked with the standardwebhooks library, retries, replicas.
 */
const gateways = useGateways();
const receivers: Array<Awaited<ReturnType<typeof startReceiver>>> = [];
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

/** Loopback over http for the receiver, and retries in milliseconds so tests run fast. */
const LOCAL = {
  WEBHOOKS_ALLOW_INSECURE: 'true',
  WEBHOOKS_ALLOW_PRIVATE: 'true',
  WEBHOOKS_RETRY_BASE_MS: '20',
  WEBHOOKS_RETRY_MAX_DELAY_MS: '100',
  // Commands may take 2 s, not 250 ms: on a loaded machine (Stryker's initial run, load 13) a
  // store call that times out answers 503, which is store-unavailable.test.ts's subject, not these.
  REDIS_COMMAND_TIMEOUT_MS: '2000',
};

async function receiver(script: number[] = []) {
  const r = await startReceiver(script);
  receivers.push(r);
  return r;
}

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

async function subscribe(gw: TestGateway, url: string, events: string[]): Promise<{ id: string; secret: string }> {
  const res = await gw.admin.inject({
    method: 'POST',
    url: '/admin/webhooks',
    headers: admin,
    payload: { url, events },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

function verified(secret: string, request: Received): unknown {
  return new Webhook(secret).verify(request.body, request.headers as Record<string, string>);
}

async function drained(...gws: TestGateway[]): Promise<void> {
  for (const gw of gws) {
    await vi.waitFor(async () => expect((await gw.deps.webhooks.queue.stats()).depth).toBe(0), {
      timeout: 10_000,
      interval: 20,
    });
  }
}

describe('admin API: /admin/webhooks', () => {
  it('creates (the secret once), lists, shows, updates, rotates and deletes an endpoint', async () => {
    const gw = await gateways.start({ env: LOCAL });
    const hook = await receiver();
    const created = await subscribe(gw, hook.url, ['key.created', 'key.quota.warning']);
    expect(created.secret).toMatch(/^whsec_/);

    const list = await gw.admin.inject({ url: '/admin/webhooks', headers: admin });
    expect(list.statusCode).toBe(200);
    expect(list.json()).toEqual([expect.objectContaining({ id: created.id, url: hook.url, description: '' })]);
    expect(list.body).not.toContain(created.secret);

    const patched = await gw.admin.inject({
      method: 'PATCH',
      url: `/admin/webhooks/${created.id}`,
      headers: admin,
      payload: { events: ['key.revoked'], description: 'billing' },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json()).toMatchObject({ events: ['key.revoked'], description: 'billing' });

    const rotated = await gw.admin.inject({
      method: 'POST',
      url: `/admin/webhooks/${created.id}/rotate`,
      headers: admin,
    });
    expect(rotated.statusCode).toBe(200);
    const { secret } = rotated.json() as { secret: string };
    expect(secret).not.toBe(created.secret);
    const shown = await gw.admin.inject({ url: `/admin/webhooks/${created.id}`, headers: admin });
    expect(shown.json()).toHaveProperty('previousSecretExpiresAt');
    expect(shown.body).not.toContain(secret);

    const removed = await gw.admin.inject({ method: 'DELETE', url: `/admin/webhooks/${created.id}`, headers: admin });
    expect(removed.statusCode).toBe(204);
    const gone = await gw.admin.inject({ url: `/admin/webhooks/${created.id}`, headers: admin });
    expect(gone.statusCode).toBe(404);
    expect(gone.json()).toEqual({ code: 'not_found', message: expect.any(String), status: 404 });
  });

  // Hostile inputs, with the endpoint rules on (no WEBHOOKS_ALLOW_*).
  const refused: Array<[string, string | object]> = [
    ['not a URL', { url: 'hooks example', events: ['key.created'] }],
    ['http without WEBHOOKS_ALLOW_INSECURE', { url: 'http://hooks.example.com/x', events: ['key.created'] }],
    ['credentials in the URL', { url: 'https://user:pw@hooks.example.com/x', events: ['key.created'] }],
    ['a loopback address', { url: 'https://127.0.0.1/x', events: ['key.created'] }],
    ['a name for loopback', { url: 'https://localhost/x', events: ['key.created'] }],
    ['the metadata service', { url: 'https://169.254.169.254/latest', events: ['key.created'] }],
    ['a private address', { url: 'https://10.1.2.3/x', events: ['key.created'] }],
    ['IPv6 loopback', { url: 'https://[::1]/x', events: ['key.created'] }],
    ['IPv4-mapped private', { url: 'https://[::ffff:192.168.0.1]/x', events: ['key.created'] }],
    ['IPv4-compatible loopback', { url: 'https://[::127.0.0.1]/x', events: ['key.created'] }],
    ['a documentation address (TEST-NET-3)', { url: 'https://203.0.113.7/x', events: ['key.created'] }],
    ['an unknown event', { url: 'https://hooks.example.com/x', events: ['key.exploded'] }],
    ['no events', { url: 'https://hooks.example.com/x', events: [] }],
    ['the same event twice', { url: 'https://hooks.example.com/x', events: ['key.created', 'key.created'] }],
    ['an unknown field', { url: 'https://hooks.example.com/x', events: ['key.created'], secret: 'mine' }],
    [
      'a control character in the description',
      { url: 'https://hooks.example.com/x', events: ['key.created'], description: 'a\u0007b' },
    ],
    ['malformed JSON', '{"url": "https://hooks.example.com/x", "events": ['],
  ];
  it.each(refused)('refuses %s with 400 in the Error shape', async (_why, payload) => {
    // The endpoint rules on; commands may take 2 s under load, as with LOCAL.
    const gw = await gateways.start({ env: { REDIS_COMMAND_TIMEOUT_MS: LOCAL.REDIS_COMMAND_TIMEOUT_MS } });
    const res = await gw.admin.inject({
      method: 'POST',
      url: '/admin/webhooks',
      headers: { ...admin, 'content-type': 'application/json' },
      payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ code: 'invalid_request', message: expect.any(String), status: 400 });
    const list = await gw.admin.inject({ url: '/admin/webhooks', headers: admin });
    expect(list.json()).toEqual([]);
  });

  it('refuses a PATCH to a private address and an empty PATCH', async () => {
    const gw = await gateways.start({ env: { REDIS_COMMAND_TIMEOUT_MS: LOCAL.REDIS_COMMAND_TIMEOUT_MS } });
    const made = await gw.admin.inject({
      method: 'POST',
      url: '/admin/webhooks',
      headers: admin,
      payload: { url: 'https://8.8.8.8/x', events: ['key.created'] },
    });
    expect(made.statusCode, made.body).toBe(201);
    const { id } = made.json() as { id: string };
    for (const payload of [{ url: 'https://192.168.1.1/x' }, {}]) {
      const res = await gw.admin.inject({ method: 'PATCH', url: `/admin/webhooks/${id}`, headers: admin, payload });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toMatchObject({ code: 'invalid_request', status: 400 });
    }
  });
});

describe.each([
  ['BullMQ on Redis', true],
  ['memory (embedded)', false],
])('delivery through %s', (_name, withRedis) => {
  const start = (env: Record<string, string> = {}) =>
    gateways.start({ env: { ...LOCAL, ...env }, ...(withRedis ? {} : { redisUrl: null }) });

  it('signs a ping so that the standardwebhooks library verifies it', async () => {
    const gw = await start();
    const hook = await receiver();
    const { id, secret } = await subscribe(gw, hook.url, ['key.created']);
    const ping = await gw.admin.inject({ method: 'POST', url: `/admin/webhooks/${id}/test`, headers: admin });
    expect(ping.statusCode).toBe(202);
    await hook.until(1);
    const [request] = hook.received as [Received];
    expect(request.headers['webhook-id']).toBe(ping.json().eventId);
    expect(verified(secret, request)).toMatchObject({ type: 'webhook.test', data: { webhookId: id } });
    expect(() => verified(`whsec_${Buffer.alloc(32, 1).toString('base64')}`, request)).toThrow();
  });

  it('delivers on the third attempt to an endpoint answering 503 twice, and lists each attempt', async () => {
    const gw = await start();
    const hook = await receiver([503, 503]);
    const { id, secret } = await subscribe(gw, hook.url, ['key.created']);
    const created = await gw.admin.inject({
      method: 'POST',
      url: '/admin/keys',
      headers: admin,
      payload: { plan: 'pro', name: 'acme' },
    });
    expect(created.statusCode).toBe(201);
    const key = created.json() as { id: string; key: string };
    await hook.until(3);
    expect(hook.received.map((r) => r.status)).toEqual([503, 503, 200]);
    // One delivery: the same webhook-id on every attempt.
    expect(new Set(hook.received.map((r) => r.headers['webhook-id'])).size).toBe(1);
    const event = verified(secret, hook.received[2] as Received);
    expect(event).toEqual({
      type: 'key.created',
      timestamp: expect.any(String),
      data: { keyId: key.id, plan: 'pro', name: 'acme' },
    });
    expect(JSON.stringify(hook.received.map((r) => r.body))).not.toContain(key.key);

    await vi.waitFor(async () => {
      const res = await gw.admin.inject({ url: `/admin/webhooks/${id}/deliveries`, headers: admin });
      expect(res.json().map((a: { statusCode: number; outcome: string }) => [a.statusCode, a.outcome])).toEqual([
        [200, 'delivered'],
        [503, 'retrying'],
        [503, 'retrying'],
      ]);
    });
    const [last] = (await gw.admin.inject({ url: `/admin/webhooks/${id}/deliveries`, headers: admin })).json();
    expect(last).toMatchObject({ attempt: 3, event: 'key.created', error: null, latencyMs: expect.any(Number) });
  });

  it('marks an endpoint failing once a delivery runs out of retries', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({
      env: {
        ...LOCAL,
        WEBHOOKS_RETRY_FOR_SECONDS: '1',
        WEBHOOKS_RETRY_BASE_MS: '200',
        WEBHOOKS_RETRY_MAX_DELAY_MS: '400',
      },
      logs,
      ...(withRedis ? {} : { redisUrl: null }),
    });
    const hook = await receiver(Array(100).fill(500));
    const { id } = await subscribe(gw, hook.url, ['key.created']);
    await gw.admin.inject({ method: 'POST', url: `/admin/webhooks/${id}/test`, headers: admin });
    await vi.waitFor(
      async () => {
        const res = await gw.admin.inject({ url: `/admin/webhooks/${id}`, headers: admin });
        expect(res.json().failing).toMatchObject({ reason: 'endpoint answered 500' });
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(logs.find((l) => l.audit === 'webhook.failing')).toMatchObject({ level: 40, webhookId: id });
    const metrics = await gw.deps.registry.getSingleMetricAsString('gateway_webhook_endpoints_failing_total');
    expect(metrics).toMatch(/^gateway_webhook_endpoints_failing_total(\{[^}]*\})? 1$/m);
    const deliveries = await gw.admin.inject({ url: `/admin/webhooks/${id}/deliveries`, headers: admin });
    expect(deliveries.json()[0]).toMatchObject({ outcome: 'failed', statusCode: 500 });
  });

  it('sends key changes: updated, rotated, ban lifted, revoked', async () => {
    const gw = await start();
    const hook = await receiver();
    await subscribe(gw, hook.url, ['key.updated', 'key.rotated', 'key.ban_lifted', 'key.revoked']);
    const { id } = await addKey(gw.deps, 'free');
    for (const [method, path, payload] of [
      ['PATCH', '', { plan: 'pro' }],
      ['POST', '/rotate', {}],
      ['DELETE', '/ban', undefined],
      ['DELETE', '', undefined],
    ] as const) {
      const res = await gw.admin.inject({
        method,
        url: `/admin/keys/${id}${path}`,
        headers: admin,
        ...(payload ? { payload } : {}),
      });
      expect(res.statusCode, res.body).toBeLessThan(300);
      // One at a time, so the order of arrival is the order of the changes.
      await hook.until(hook.received.length + 1);
    }
    expect(hook.events().map((e) => e.type)).toEqual(['key.updated', 'key.rotated', 'key.ban_lifted', 'key.revoked']);
    expect(hook.events()[0]?.data).toEqual({ keyId: id, plan: 'pro', name: 'test-free', changed: ['plan'] });
  });

  it('sends customer changes: created, updated, deleted, each once, under its audit name', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({
      logs,
      env: { ...LOCAL, LOG_LEVEL: 'info' },
      ...(withRedis ? {} : { redisUrl: null }),
    });
    const hook = await receiver();
    await subscribe(gw, hook.url, ['customer.created', 'customer.updated', 'customer.deleted']);
    const made = await gw.admin.inject({
      method: 'POST',
      url: '/admin/customers',
      headers: admin,
      payload: { name: 'Acme', plan: 'free', externalId: 'cus_stripe_1' },
    });
    expect(made.statusCode, made.body).toBe(201);
    const { id } = made.json() as { id: string };
    await hook.until(1);
    for (const [method, payload] of [
      ['PATCH', { plan: 'pro', name: 'Acme Ltd' }],
      ['DELETE', undefined],
    ] as const) {
      const res = await gw.admin.inject({
        method,
        url: `/admin/customers/${id}`,
        headers: admin,
        ...(payload ? { payload } : {}),
      });
      expect(res.statusCode, res.body).toBeLessThan(300);
      await hook.until(hook.received.length + 1);
    }
    await drained(gw);
    const base = { customerId: id, externalId: 'cus_stripe_1' };
    expect(hook.events().map((e) => [e.type, e.data])).toEqual([
      ['customer.created', { ...base, plan: 'free', name: 'Acme' }],
      [
        'customer.updated',
        { ...base, plan: 'pro', name: 'Acme Ltd', changed: ['plan', 'name'], from: 'free', to: 'pro' },
      ],
      ['customer.deleted', { ...base, plan: 'pro', name: 'Acme Ltd', revokedKeys: 0 }],
    ]);
    // The audit lines carry the events' names: one vocabulary for both.
    const audited = logs.filter((l) => l.customerId === id && typeof l.audit === 'string').map((l) => l.audit);
    expect(audited).toEqual(['customer.created', 'customer.updated', 'customer.deleted']);
  });

  it('signs with the old secret too while a rotation’s grace lasts, then with the new one alone', async () => {
    // The gateway's clock starts a day back, so that the grace (24 h from the rotation) ends now:
    // every delivery's timestamp is then within the 5 minutes a receiver tolerates.
    let clock = Date.now() - DAY_MS;
    const gw = await gateways.start({
      env: LOCAL,
      now: () => clock,
      ...(withRedis ? {} : { redisUrl: null }),
    });
    const hook = await receiver();
    const { id, secret: old } = await subscribe(gw, hook.url, ['key.created']);
    const rotated = await gw.admin.inject({ method: 'POST', url: `/admin/webhooks/${id}/rotate`, headers: admin });
    expect(rotated.statusCode).toBe(200);
    const { secret, previousSecretExpiresAt } = rotated.json() as { secret: string; previousSecretExpiresAt: string };
    expect(Date.parse(previousSecretExpiresAt)).toBe(clock + DAY_MS);
    const ping = async (): Promise<Received> => {
      const res = await gw.admin.inject({ method: 'POST', url: `/admin/webhooks/${id}/test`, headers: admin });
      expect(res.statusCode).toBe(202);
      await hook.until(hook.received.length + 1);
      return hook.received.at(-1) as Received;
    };

    clock = Date.parse(previousSecretExpiresAt) - 60_000;
    const during = await ping();
    expect(verified(old, during)).toMatchObject({ type: 'webhook.test', data: { webhookId: id } });
    expect(verified(secret, during)).toMatchObject({ type: 'webhook.test', data: { webhookId: id } });

    // The grace ends at previousSecretExpiresAt itself; the timestamp is the delivery's start, in seconds.
    clock = Date.parse(previousSecretExpiresAt);
    const atEnd = await ping();
    expect(() => verified(old, atEnd)).toThrow();
    expect(verified(secret, atEnd)).toMatchObject({ type: 'webhook.test' });
    expect(atEnd.headers['webhook-timestamp']).toBe(String(Math.floor(clock / 1000)));

    clock = Date.parse(previousSecretExpiresAt) + 60_000;
    const after = await ping();
    expect(() => verified(old, after)).toThrow();
    expect(verified(secret, after)).toMatchObject({ type: 'webhook.test', data: { webhookId: id } });
  });

  it('sends key.banned when a key is banned, and nothing for events not subscribed to', async () => {
    const gw = await start({ BAN_THRESHOLD: '1', BAN_GRACE_MS: '0' });
    const hook = await receiver();
    await subscribe(gw, hook.url, ['key.banned']);
    const { key } = await addKey(gw.deps, 'enterprise', { perMinute: 1, perDay: 1 });
    for (let i = 0; i < 4; i++) await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    await hook.until(1);
    await drained(gw);
    expect(hook.events().map((e) => e.type)).toEqual(['key.banned']);
    expect(hook.events()[0]?.data).toMatchObject({ plan: 'enterprise', bannedUntil: expect.any(String) });
  });
});

describe('quota events', () => {
  it('two replicas crossing 80 % together send one key.quota.warning, then one key.quota.exhausted', async () => {
    const prefix = `wq${Date.now()}:`;
    const hook = await receiver();
    const a = await gateways.start({ env: LOCAL, prefix });
    const b = await gateways.start({ env: LOCAL, prefix, keyStore: a.deps.keyStore });
    await subscribe(a, hook.url, ['key.quota.warning', 'key.quota.exhausted']);
    const { id, key } = await addKey(a.deps, 'enterprise', { perMinute: 20, perDay: 20 });
    // 16 of 20 (80 %) at once, half through each replica.
    const burst = (n: number) =>
      Promise.all(
        Array.from({ length: n }, (_, i) => (i % 2 ? a : b).app.inject({ url: '/v1/pets', headers: bearer(key) })),
      );
    expect((await burst(16)).map((r) => r.statusCode)).toEqual(Array(16).fill(200));
    await hook.until(1);
    expect((await burst(4)).map((r) => r.statusCode)).toEqual(Array(4).fill(200));
    await hook.until(2);
    await drained(a, b);
    const events = hook.events();
    expect(events.map((e) => e.type)).toEqual(['key.quota.warning', 'key.quota.exhausted']);
    expect(events[0]?.data).toEqual({
      keyId: id,
      plan: 'enterprise',
      name: 'test-enterprise',
      window: 'day',
      limit: 20,
      used: 16,
      threshold: 80,
      resetAt: expect.stringMatching(/T00:00:00\.000Z$/),
    });
    expect(events[1]?.data).toMatchObject({ window: 'day', used: 20, threshold: 100 });
  });

  it('sends a warning at each threshold of WEBHOOKS_QUOTA_WARNING_PERCENT', async () => {
    const hook = await receiver();
    const gw = await gateways.start({ env: { ...LOCAL, WEBHOOKS_QUOTA_WARNING_PERCENT: '50,90' } });
    await subscribe(gw, hook.url, ['key.quota.warning']);
    const { key } = await addKey(gw.deps, 'enterprise', { perMinute: 10, perDay: 10 });
    for (let i = 0; i < 4; i++) await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    expect(hook.received).toHaveLength(0);
    for (let i = 0; i < 5; i++) await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    await hook.until(2);
    await drained(gw);
    expect(hook.events().map((e) => [e.data.threshold, e.data.used])).toEqual([
      [50, 5],
      [90, 9],
    ]);
  });
});

describe.each([
  ['Redis', true],
  ['memory', false],
])('quota events day after day (%s)', (_name, withRedis) => {
  it('sends a day’s warning again on each following day: the once-a-period marker ends with its day', async () => {
    const prefix = `wd${randomUUID().slice(0, 8)}:`;
    const clock = testClock();
    const gw = await gateways.start({ env: LOCAL, prefix, now: clock.now, ...(withRedis ? {} : { redisUrl: null }) });
    if (gw.redis) clock.ages({ client: gw.redis as Redis, prefix });
    const hook = await receiver();
    await subscribe(gw, hook.url, ['key.quota.warning']);
    const { key } = await addKey(gw.deps, 'enterprise', { perMinute: 100, perDay: 10 });
    const today = Math.floor(clock.now() / DAY_MS);
    for (let day = 0; day < 3; day++) {
      // Ten minutes into each next day, Redis's clock with it: what expires with a day has.
      if (day > 0) await clock.moveTo((today + day) * DAY_MS + 10 * 60_000);
      for (let i = 0; i < 8; i++) {
        expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).statusCode).toBe(200);
      }
      await vi.waitFor(() => expect(hook.received).toHaveLength(day + 1), { timeout: 5_000, interval: 20 });
    }
    await drained(gw);
    expect(hook.events().map((e) => [e.type, e.data.used, e.data.resetAt])).toEqual(
      [1, 2, 3].map((d) => ['key.quota.warning', 8, new Date((today + d) * DAY_MS).toISOString()]),
    );
  });
});

describe('expiry notices', () => {
  it('sends key.expiring once a day before, whichever replica scans first', async () => {
    const prefix = `we${Date.now()}:`;
    const hook = await receiver();
    const env = { ...LOCAL, WEBHOOKS_EXPIRY_SCAN_SECONDS: '1' };
    const a = await gateways.start({ env, prefix });
    const b = await gateways.start({ env, prefix, keyStore: a.deps.keyStore });
    await subscribe(a, hook.url, ['key.expiring', 'key.expired']);
    const made = await a.admin.inject({
      method: 'POST',
      url: '/admin/keys',
      headers: admin,
      payload: { plan: 'free', expiresAt: new Date(Date.now() + 12 * 3_600_000).toISOString() },
    });
    const { id } = made.json() as { id: string };
    await hook.until(1);
    // Both replicas scan again at once: the notice is already sent.
    await Promise.all([a.deps.webhooks.scan(), b.deps.webhooks.scan()]);
    await drained(a, b);
    expect(hook.events()).toEqual([
      {
        type: 'key.expiring',
        timestamp: expect.any(String),
        data: { keyId: id, plan: 'free', name: expect.any(String), expiresAt: expect.any(String), days: 1 },
      },
    ]);
  });
});

describe('key.expiring', () => {
  it('says how many days are left, rounded up, not which notice it is', async () => {
    const hook = await receiver();
    const gw = await gateways.start({ env: { ...LOCAL, WEBHOOKS_EXPIRY_SCAN_SECONDS: '1' } });
    await subscribe(gw, hook.url, ['key.expiring']);
    const ids = new Map<string, number>();
    for (const [hours, days] of [
      [48, 2],
      [12, 1],
      [5 * 24 + 1, 6],
    ] as const) {
      const made = await gw.admin.inject({
        method: 'POST',
        url: '/admin/keys',
        headers: admin,
        payload: { plan: 'free', expiresAt: new Date(Date.now() + hours * 3_600_000).toISOString() },
      });
      ids.set((made.json() as { id: string }).id, days);
    }
    await hook.until(3);
    await drained(gw);
    const told = new Map(hook.events().map((e) => [e.data.keyId as string, e.data.days]));
    expect(told).toEqual(ids);
  });
});

describe('with Redis', () => {
  it('says at start that deliveries are queued in BullMQ, shared by every replica', async () => {
    const logs: Record<string, unknown>[] = [];
    await gateways.start({ logs });
    expect(logs.find((l) => String(l.msg).startsWith('webhooks: deliveries'))).toMatchObject({
      level: 30,
      msg: 'webhooks: deliveries queued in redis (BullMQ), shared by every replica',
    });
  });
});

describe('embedded mode', () => {
  it('says at start that deliveries wait in memory', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await startGateway({ redisUrl: null, logs });
    try {
      expect(logs.find((l) => String(l.msg).startsWith('webhooks: deliveries wait in memory'))).toMatchObject({
        level: 30,
      });
    } finally {
      await gw.close();
    }
  });
});

describe.each([
  ['BullMQ on Redis', true],
  ['memory (embedded)', false],
])('an endpoint’s standing, through %s', (_name, withRedis) => {
  /** Retries for 1 s only: an endpoint that keeps failing is marked within a second or so. */
  const start = (logs?: Record<string, unknown>[]) =>
    gateways.start({
      env: {
        ...LOCAL,
        WEBHOOKS_RETRY_FOR_SECONDS: '1',
        WEBHOOKS_RETRY_BASE_MS: '200',
        WEBHOOKS_RETRY_MAX_DELAY_MS: '400',
      },
      ...(logs ? { logs } : {}),
      ...(withRedis ? {} : { redisUrl: null }),
    });
  const show = async (gw: TestGateway, id: string) =>
    (await gw.admin.inject({ url: `/admin/webhooks/${id}`, headers: admin })).json() as {
      failing?: { since: string; reason: string };
    };
  const deliveries = async (gw: TestGateway, id: string) =>
    (await gw.admin.inject({ url: `/admin/webhooks/${id}/deliveries`, headers: admin })).json() as Array<{
      outcome: string;
      statusCode: number | null;
      error: string | null;
      eventId: string;
      at: string;
    }>;
  const ping = async (gw: TestGateway, id: string) => {
    const res = await gw.admin.inject({ method: 'POST', url: `/admin/webhooks/${id}/test`, headers: admin });
    expect(res.statusCode).toBe(202);
    return (res.json() as { eventId: string }).eventId;
  };

  it('stays failing since its first exhaustion while deliveries keep failing, and is cleared by the next delivered one', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await start(logs);
    const script: number[] = Array(1_000).fill(500);
    const hook = await receiver(script);
    const { id } = await subscribe(gw, hook.url, ['key.created']);
    const failed = async (n: number) =>
      vi.waitFor(async () => expect((await deliveries(gw, id)).filter((d) => d.outcome === 'failed')).toHaveLength(n), {
        timeout: 10_000,
        interval: 50,
      });

    const first = await ping(gw, id);
    await failed(1);
    // The delivery's outcome and the endpoint's standing are two writes, the standing second: a
    // read between them (seen once in a CI run) finds the delivery failed and no standing yet.
    const marked = await vi.waitFor(
      async () => {
        const endpoint = await show(gw, id);
        expect(endpoint.failing).toEqual({ since: expect.any(String), reason: 'endpoint answered 500' });
        return endpoint;
      },
      { timeout: 10_000, interval: 50 },
    );
    // What the operator is told, once per exhaustion.
    const line = logs.find((l) => l.audit === 'webhook.failing');
    expect(line).toMatchObject({
      level: 40,
      webhookId: id,
      url: hook.url,
      eventId: first,
      event: 'webhook.test',
      attempts: expect.any(Number),
      lastError: 'endpoint answered 500',
    });
    expect(line?.msg).toBe(
      `webhooks: endpoint ${id} marked failing: a delivery ran out of retries after ${line?.attempts} attempts`,
    );

    await ping(gw, id);
    await failed(2);
    expect((await show(gw, id)).failing).toEqual(marked.failing);
    const metrics = await gw.deps.registry.getSingleMetricAsString('gateway_webhook_endpoints_failing_total');
    expect(metrics).toMatch(/^gateway_webhook_endpoints_failing_total(\{[^}]*\})? 2$/m);

    script.length = 0;
    await ping(gw, id);
    await vi.waitFor(async () => expect((await deliveries(gw, id))[0]?.outcome).toBe('delivered'), {
      timeout: 10_000,
      interval: 50,
    });
    await vi.waitFor(async () => expect(await show(gw, id)).not.toHaveProperty('failing'), { interval: 50 });
  });

  it('lists a refused connection with its code and reason, and no status', async () => {
    const gw = await start();
    // Nothing listens on the discard port.
    const { id } = await subscribe(gw, 'http://127.0.0.1:9/hook', ['key.created']);
    await ping(gw, id);
    await vi.waitFor(async () => expect((await deliveries(gw, id)).length).toBeGreaterThan(0), { interval: 50 });
    expect((await deliveries(gw, id)).at(-1)).toMatchObject({
      statusCode: null,
      outcome: 'retrying',
      error: 'ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9',
    });
  });

  it('drops a delivery whose endpoint was deleted before its retry, and counts it as dropped', async () => {
    const gw = await start();
    const hook = await receiver([503]);
    const { id } = await subscribe(gw, hook.url, ['key.created']);
    await ping(gw, id);
    await hook.until(1);
    const removed = await gw.admin.inject({ method: 'DELETE', url: `/admin/webhooks/${id}`, headers: admin });
    expect(removed.statusCode).toBe(204);
    await vi.waitFor(
      async () =>
        expect(await gw.deps.registry.getSingleMetricAsString('gateway_webhook_deliveries_total')).toMatch(
          /^gateway_webhook_deliveries_total\{event="webhook\.test",outcome="dropped"[^}]*\} 1$/m,
        ),
      { timeout: 10_000, interval: 50 },
    );
    await drained(gw);
    expect(hook.received).toHaveLength(1);
  });

  it('takes a redirect or any other 3xx as a failed attempt, follows none, and lists each attempt as made', async () => {
    const gw = await start();
    const hook = await receiver([300, 302]);
    const { id } = await subscribe(gw, hook.url, ['key.created']);
    const before = Date.now();
    const eventId = await ping(gw, id);
    await hook.until(3);
    await vi.waitFor(async () => expect(await deliveries(gw, id)).toHaveLength(3), { interval: 50 });
    const made = await deliveries(gw, id);
    expect(made.map((d) => [d.statusCode, d.outcome, d.error, d.eventId])).toEqual([
      [200, 'delivered', null, eventId],
      [302, 'retrying', 'endpoint answered 302', eventId],
      [300, 'retrying', 'endpoint answered 300', eventId],
    ]);
    for (const d of made) expect(Date.parse(d.at)).toBeGreaterThanOrEqual(before - 1_000);
    expect(hook.received.map((r) => r.headers['user-agent'])).toEqual(Array(3).fill('animal-store-gateway-webhooks'));
    expect(hook.received.map((r) => r.headers['content-type'])).toEqual(Array(3).fill('application/json'));
  });
});

describe('admin API: what each webhook change leaves in the audit log', () => {
  it('logs and counts create, update, rotate, test and delete, naming the endpoint and no secret', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ env: LOCAL, logs });
    const hook = await receiver();
    const { id, secret } = await subscribe(gw, hook.url, ['key.created']);
    const before = (await gw.admin.inject({ url: `/admin/webhooks/${id}`, headers: admin })).json();
    expect(before).not.toHaveProperty('updatedAt');
    const patched = await gw.admin.inject({
      method: 'PATCH',
      url: `/admin/webhooks/${id}`,
      headers: admin,
      payload: { url: `${hook.url}?v=2`, description: 'billing' },
    });
    expect(patched.json()).toMatchObject({
      url: `${hook.url}?v=2`,
      events: ['key.created'],
      updatedAt: expect.any(String),
    });
    const rotated = await gw.admin.inject({ method: 'POST', url: `/admin/webhooks/${id}/rotate`, headers: admin });
    const { previousSecretExpiresAt, secret: newSecret } = rotated.json() as {
      previousSecretExpiresAt: string;
      secret: string;
    };
    const pinged = await gw.admin.inject({ method: 'POST', url: `/admin/webhooks/${id}/test`, headers: admin });
    const { eventId } = pinged.json() as { eventId: string };
    expect(pinged.json()).toEqual({ id, eventId });
    await hook.until(1);
    await gw.admin.inject({ method: 'DELETE', url: `/admin/webhooks/${id}`, headers: admin });

    const audit = logs.filter((l) => typeof l.audit === 'string' && String(l.audit).startsWith('webhook.'));
    expect(audit.map((l) => [l.audit, l.webhookId, l.level, l.msg])).toEqual(
      ['webhook.created', 'webhook.updated', 'webhook.rotated', 'webhook.tested', 'webhook.deleted'].map((action) => [
        action,
        id,
        30,
        `admin: ${action} ${id}`,
      ]),
    );
    expect(audit[0]).toMatchObject({ url: hook.url, events: ['key.created'] });
    expect(audit[1]).toMatchObject({ changed: ['url', 'description'] });
    expect(audit[2]).toMatchObject({ previousSecretExpiresAt });
    expect(audit[3]).toMatchObject({ eventId });
    const text = JSON.stringify(logs);
    expect(text).not.toContain(secret);
    expect(text).not.toContain(newSecret);
    const counted = await gw.deps.registry.getSingleMetricAsString('gateway_admin_actions_total');
    for (const action of [
      'webhook.created',
      'webhook.updated',
      'webhook.rotated',
      'webhook.tested',
      'webhook.deleted',
    ]) {
      expect(counted).toMatch(new RegExp(`^gateway_admin_actions_total\\{action="${action}"[^}]*\\} 1$`, 'm'));
    }
  });

  it('answers 404 in the Error shape for an endpoint that does not exist, on every route', async () => {
    const gw = await gateways.start();
    for (const [method, path] of [
      ['GET', ''],
      ['PATCH', ''],
      ['DELETE', ''],
      ['POST', '/rotate'],
      ['POST', '/test'],
      ['GET', '/deliveries'],
    ] as const) {
      const res = await gw.admin.inject({
        method,
        url: `/admin/webhooks/wh_missing${path}`,
        headers: admin,
        ...(method === 'PATCH' ? { payload: { description: 'x' } } : {}),
      });
      expect(res.statusCode, `${method} ${path}`).toBe(404);
      expect(res.json()).toEqual({ code: 'not_found', message: 'No webhook with id wh_missing', status: 404 });
    }
  });
});

describe('key.expired', () => {
  it('is sent once a key has expired, without days, and not for a key that expired over 7 days ago', async () => {
    const clock = testClock();
    const start = clock.now();
    const gw = await gateways.start({ env: LOCAL, now: clock.now, redisUrl: null });
    const hook = await receiver();
    await subscribe(gw, hook.url, ['key.expiring', 'key.expired']);
    const make = async (expiresAt: number) => {
      const made = await gw.admin.inject({
        method: 'POST',
        url: '/admin/keys',
        headers: admin,
        payload: { plan: 'free', name: 'expiring', expiresAt: new Date(expiresAt).toISOString() },
      });
      expect(made.statusCode, made.body).toBe(201);
      return (made.json() as { id: string }).id;
    };
    // At the scan, one expired an hour ago and the other 8 days and an hour ago.
    const recent = await make(start + 8 * DAY_MS + 3_600_000);
    await make(start + 3_600_000);
    await clock.moveTo(start + 8 * DAY_MS + 2 * 3_600_000);
    await gw.deps.webhooks.scan();
    await hook.until(1);
    await gw.deps.webhooks.scan();
    await drained(gw);
    expect(hook.events()).toEqual([
      {
        type: 'key.expired',
        timestamp: new Date(clock.now()).toISOString(),
        data: {
          keyId: recent,
          plan: 'free',
          name: 'expiring',
          expiresAt: new Date(start + 8 * DAY_MS + 3_600_000).toISOString(),
        },
      },
    ]);
  });
});

describe.each([
  ['BullMQ on Redis', true],
  ['memory (embedded)', false],
])('the delivery queue’s metrics, through %s', (_name, withRedis) => {
  it('show how many deliveries wait and how long the oldest has waited, 0 when none does', async () => {
    const clock = testClock();
    const gw = await gateways.start({
      // A minute before the retry: the delivery waits while the test reads the metrics.
      env: { ...LOCAL, WEBHOOKS_RETRY_BASE_MS: '60000', WEBHOOKS_RETRY_MAX_DELAY_MS: '60000' },
      now: clock.now,
      ...(withRedis ? {} : { redisUrl: null }),
    });
    const metric = async (name: string) => {
      const text = await gw.deps.registry.getSingleMetricAsString(name);
      return Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1]);
    };
    expect(await metric('gateway_webhook_queue_depth')).toBe(0);
    expect(await metric('gateway_webhook_oldest_pending_seconds')).toBe(0);
    const hook = await receiver([503]);
    const { id } = await subscribe(gw, hook.url, ['key.created']);
    const ping = await gw.admin.inject({ method: 'POST', url: `/admin/webhooks/${id}/test`, headers: admin });
    expect(ping.statusCode, ping.body).toBe(202);
    await hook.until(1);
    await clock.advance(90_000);
    await vi.waitFor(async () => expect(await metric('gateway_webhook_queue_depth')).toBe(1), { interval: 20 });
    expect(await metric('gateway_webhook_oldest_pending_seconds')).toBe(90);
  });
});

describe.each([
  ['Redis', true],
  ['memory', false],
])('admin API: an endpoint as it is shown (%s)', (_name, withRedis) => {
  it('shows its URL as checked, when it changed, the old secret’s end after a rotation, and a failing mark; lists them oldest first', async () => {
    let t = Date.UTC(2026, 10, 26, 12);
    const iso = (ms: number) => new Date(ms).toISOString();
    const gw = await gateways.start({
      env: { REDIS_COMMAND_TIMEOUT_MS: LOCAL.REDIS_COMMAND_TIMEOUT_MS },
      now: () => t,
      ...(withRedis ? {} : { redisUrl: null }),
    });
    const created = await gw.admin.inject({
      method: 'POST',
      url: '/admin/webhooks',
      headers: admin,
      payload: { url: 'https://8.8.8.8:443/a/../hook', events: ['key.created'] },
    });
    expect(created.statusCode, created.body).toBe(201);
    const { id, secret } = created.json() as { id: string; secret: string };
    expect(id).toMatch(/^wh_[\w-]{16}$/);
    expect(Buffer.from(secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
    const first = { id, url: 'https://8.8.8.8/hook', events: ['key.created'], description: '', createdAt: iso(t) };
    expect(created.json()).toEqual({ ...first, secret });
    const show = async (which = id) =>
      (await gw.admin.inject({ url: `/admin/webhooks/${which}`, headers: admin })).json();
    expect(await show()).toEqual(first);

    t += 60_000;
    const patched = await gw.admin.inject({
      method: 'PATCH',
      url: `/admin/webhooks/${id}`,
      headers: admin,
      payload: { url: 'https://8.8.4.4:443/x/./y' },
    });
    const changed = { ...first, url: 'https://8.8.4.4/x/y', updatedAt: iso(t) };
    expect(patched.json()).toEqual(changed);
    const described = await gw.admin.inject({
      method: 'PATCH',
      url: `/admin/webhooks/${id}`,
      headers: admin,
      payload: { description: 'billing', events: ['key.revoked', 'key.banned'] },
    });
    expect(described.json()).toEqual({ ...changed, description: 'billing', events: ['key.revoked', 'key.banned'] });

    t += 60_000;
    const rotated = await gw.admin.inject({ method: 'POST', url: `/admin/webhooks/${id}/rotate`, headers: admin });
    const until = iso(t + DAY_MS);
    expect(rotated.json()).toEqual({ id, secret: expect.stringMatching(/^whsec_/), previousSecretExpiresAt: until });
    const afterRotation = {
      ...changed,
      description: 'billing',
      events: ['key.revoked', 'key.banned'],
      updatedAt: iso(t),
      previousSecretExpiresAt: until,
    };
    expect(await show()).toEqual(afterRotation);

    // Marked failing by a delivery (deliver.ts), as the store holds it.
    const stored = await gw.deps.webhooks.store.get(id);
    const failing = { since: iso(t), reason: 'endpoint answered 503' };
    if (stored) await gw.deps.webhooks.store.put({ ...stored, failing });
    expect(await show()).toEqual({ ...afterRotation, failing });

    // Ones made with earlier clocks (other replicas', say), each earlier than the last, are
    // listed oldest first from Redis, whose hash has no order of its own (its fields are too long
    // for a listpack); the memory store lists in the order they were made.
    const made = [id];
    for (let i = 1; i <= 5; i++) {
      t -= DAY_MS;
      const older = await gw.admin.inject({
        method: 'POST',
        url: '/admin/webhooks',
        headers: admin,
        payload: { url: 'https://8.8.8.8/older', events: ['key.banned'], description: `old ${i}` },
      });
      made.push(older.json().id);
    }
    const list = (await gw.admin.inject({ url: '/admin/webhooks', headers: admin })).json();
    expect(list.map((s: { id: string }) => s.id)).toEqual(withRedis ? [...made].reverse() : made);
  });
});

describe('keys from API_KEYS_FILE', () => {
  it('get their expiry notices too, named by their plan and name', async () => {
    const { record } = createKey({
      plan: 'pro',
      name: 'from-file',
      expiresAt: new Date(Date.now() + 12 * 3_600_000).toISOString(),
    });
    const file = join(mkdtempSync(join(tmpdir(), 'webhook-keys-')), 'keys.json');
    writeFileSync(file, JSON.stringify([toKeyFileEntry(record)]));
    const hook = await receiver();
    const gw = await gateways.start({ env: { ...LOCAL, API_KEYS_FILE: file }, redisUrl: null });
    await subscribe(gw, hook.url, ['key.expiring']);
    await gw.deps.webhooks.scan();
    await hook.until(1);
    expect(hook.events()).toEqual([
      {
        type: 'key.expiring',
        timestamp: expect.any(String),
        data: { keyId: record.id, plan: 'pro', name: 'from-file', expiresAt: record.expiresAt, days: 1 },
      },
    ]);
  });
});

describe('an endpoint created while deliveries cannot start', () => {
  it('is created all the same, says so in the log, and the next endpoint starts them', async () => {
    const logs: Record<string, unknown>[] = [];
    const gw = await gateways.start({ env: LOCAL, redisUrl: null, logs });
    const queue = gw.deps.webhooks.queue;
    const start = queue.start.bind(queue);
    // The queue failing to start, as BullMQ's does while Redis is not ready: once.
    queue.start = async () => {
      queue.start = start;
      throw new Error('queue not ready');
    };
    const hook = await receiver();
    const first = await subscribe(gw, hook.url, ['key.created']);
    expect(
      logs
        .filter((l) => String(l.msg).startsWith('webhooks: deliveries not started'))
        .map((l) => [l.level, l.msg, (l.err as { message?: string } | undefined)?.message]),
    ).toEqual([[40, 'webhooks: deliveries not started yet; the next scan round starts them', 'queue not ready']]);
    expect((await gw.admin.inject({ url: `/admin/webhooks/${first.id}`, headers: admin })).statusCode).toBe(200);
    await subscribe(gw, hook.url, ['key.revoked']);
    const ping = await gw.admin.inject({ method: 'POST', url: `/admin/webhooks/${first.id}/test`, headers: admin });
    expect(ping.statusCode).toBe(202);
    await hook.until(1);
    expect(verified(first.secret, hook.received[0] as Received)).toMatchObject({ type: 'webhook.test' });
  });
});
