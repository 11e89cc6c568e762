import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startReceiver } from '@animal-store/gateway/test/support/webhook-receiver.js';
import { Webhook } from 'standardwebhooks';
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { RedisProcess, redisServerBinary } from '../support/redis.js';
import { freePort } from '../support/runtime.js';
import { killAllServices, ServiceProcess } from '../support/service-process.js';

/**
 * Every admin route with Redis frozen (SIGSTOP: connections stay open, nothing answers) and with
 * Redis dead (connection refused), on a gateway process started as in production: a route that
 * needs Redis answers 503 in the Error shape with Retry-After, within its command timeout and
 * never a 500; a route that does not (the plans, the console) goes on answering. With Redis and no
 * MongoDB, as here, keys and customers live in that Redis too: their routes need it. A Redis of this
 * file's own: it is frozen and killed.
 */

const ADMIN_TOKEN = 'faults-admin-stores-token-0123';
const COMMAND_TIMEOUT_MS = 200;
/** The slowest admin route waits on a few Redis commands in turn; none may wait much longer. */
const BOUND_MS = 3_000;

interface Answer {
  status: number;
  headers: Headers;
  body: string;
  ms: number;
}

interface Fixtures {
  keyId: string;
  /** A key for the revoke row: the others use keyId. */
  spareKeyId: string;
  /** A lone key on a priced plan with credit terms of its own, for the key credit and invoice rows. */
  creditKeyId: string;
  customerId: string;
  webhookId: string;
}

/** A cursor as the export gives them (metering-store.ts cursorOf): a stream position, wrapped. */
const CURSOR = Buffer.from('m1:1-0').toString('base64url');

type Row = [label: string, method: string, path: (f: Fixtures) => string, body: unknown, ok: number | 503];

/** What each route answers with Redis unreachable: its usual status, or 503. */
const ROUTES: Row[] = [
  ['plans', 'GET', () => '/admin/plans', undefined, 200],
  ['list keys', 'GET', () => '/admin/keys', undefined, 503],
  ['show a key', 'GET', (f) => `/admin/keys/${f.keyId}`, undefined, 503],
  ['create a key', 'POST', () => '/admin/keys', { plan: 'free' }, 503],
  ['update a key', 'PATCH', (f) => `/admin/keys/${f.keyId}`, { name: 'renamed' }, 503],
  ['rotate a key', 'POST', (f) => `/admin/keys/${f.keyId}/rotate`, {}, 503],
  ['revoke a key', 'DELETE', (f) => `/admin/keys/${f.spareKeyId}`, undefined, 503],
  ['live usage', 'GET', (f) => `/admin/keys/${f.keyId}/usage`, undefined, 503],
  ['usage history', 'GET', (f) => `/admin/keys/${f.keyId}/usage/history`, undefined, 503],
  ['usage history as CSV', 'GET', (f) => `/admin/keys/${f.keyId}/usage/history?format=csv`, undefined, 503],
  ['top keys', 'GET', () => '/admin/usage', undefined, 503],
  ['customer usage history', 'GET', (f) => `/admin/customers/${f.customerId}/usage/history`, undefined, 503],
  [
    'customer usage history by period, as CSV',
    'GET',
    (f) => `/admin/customers/${f.customerId}/usage/history?granularity=period&format=csv`,
    undefined,
    503,
  ],
  ['a customer’s live usage', 'GET', (f) => `/admin/customers/${f.customerId}/usage`, undefined, 503],
  ['a customer’s credit balance', 'GET', (f) => `/admin/customers/${f.customerId}/credits`, undefined, 503],
  ['a customer’s credit ledger', 'GET', (f) => `/admin/customers/${f.customerId}/credits/ledger`, undefined, 503],
  ['an invoice preview', 'GET', (f) => `/admin/customers/${f.customerId}/invoice-preview`, undefined, 503],
  [
    'an invoice preview as CSV',
    'GET',
    (f) => `/admin/customers/${f.customerId}/invoice-preview?period=current&format=csv`,
    undefined,
    503,
  ],
  ['metering events', 'GET', () => '/admin/metering/events', undefined, 503],
  [
    'metering events for Stripe, after a cursor',
    'GET',
    () => `/admin/metering/events?after=${CURSOR}&format=stripe-meter-events`,
    undefined,
    503,
  ],
  ['a top-up', 'POST', (f) => `/admin/customers/${f.customerId}/credits`, { amount: 10, reason: 'order 1' }, 503],
  ['set a lone key’s credit terms', 'PATCH', (f) => `/admin/keys/${f.creditKeyId}`, { credits: {} }, 503],
  ['a lone key’s credit balance', 'GET', (f) => `/admin/keys/${f.creditKeyId}/credits`, undefined, 503],
  ['a lone key’s credit ledger', 'GET', (f) => `/admin/keys/${f.creditKeyId}/credits/ledger`, undefined, 503],
  ['a lone key’s invoice preview', 'GET', (f) => `/admin/keys/${f.creditKeyId}/invoice-preview`, undefined, 503],
  [
    'a lone key’s invoice preview as CSV',
    'GET',
    (f) => `/admin/keys/${f.creditKeyId}/invoice-preview?period=previous&format=csv`,
    undefined,
    503,
  ],
  [
    'a lone key’s top-up',
    'POST',
    (f) => `/admin/keys/${f.creditKeyId}/credits`,
    { amount: 10, reason: 'order 2' },
    503,
  ],
  ['a portal session', 'POST', (f) => `/admin/customers/${f.customerId}/portal-sessions`, undefined, 503],
  ['lift a ban', 'DELETE', (f) => `/admin/keys/${f.keyId}/ban`, undefined, 503],
  ['bans in force', 'GET', () => '/admin/bans', undefined, 503],
  ['list webhooks', 'GET', () => '/admin/webhooks', undefined, 503],
  [
    'create a webhook',
    'POST',
    () => '/admin/webhooks',
    { url: 'http://127.0.0.1:9/hook', events: ['key.created'] },
    503,
  ],
  ['show a webhook', 'GET', (f) => `/admin/webhooks/${f.webhookId}`, undefined, 503],
  ['update a webhook', 'PATCH', (f) => `/admin/webhooks/${f.webhookId}`, { description: 'x' }, 503],
  ['rotate a webhook secret', 'POST', (f) => `/admin/webhooks/${f.webhookId}/rotate`, {}, 503],
  ['ping a webhook', 'POST', (f) => `/admin/webhooks/${f.webhookId}/test`, {}, 503],
  ['webhook deliveries', 'GET', (f) => `/admin/webhooks/${f.webhookId}/deliveries`, undefined, 503],
  ['delete a webhook', 'DELETE', (f) => `/admin/webhooks/${f.webhookId}`, undefined, 503],
  ['the console', 'GET', () => '/console', undefined, 200],
  ['the console’s script', 'GET', () => '/console/app.js', undefined, 200],
];

/** The spec's four plans, pro with a price so that the invoice previews reach the history. */
function plansFile(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'admin-stores-')), 'plans.json');
  const plans = {
    free: { windows: { minute: 60, day: 1000 } },
    pro: {
      windows: { minute: 300, day: 10000 },
      price: { currency: 'EUR', base: 4900, includedUnits: 100000, unitPrice: 50, per: 1000 },
    },
    business: { windows: { minute: 1000, day: 100000 } },
    enterprise: {},
  };
  writeFileSync(path, JSON.stringify({ plans }));
  return path;
}

/** A Redis of the test's own and a gateway process on it, with its admin listener. */
class Stack {
  private constructor(
    readonly redis: RedisProcess,
    readonly gateway: ServiceProcess,
    private readonly admin: string,
  ) {}

  static async start(): Promise<Stack> {
    const redis = await RedisProcess.start();
    const adminPort = await freePort();
    const gateway = await ServiceProcess.start('gateway', {
      REDIS_URL: redis.url,
      REDIS_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS),
      ADMIN_TOKEN,
      ADMIN_PORT: String(adminPort),
      PORTAL_PORT: '0',
      PETS_URL: 'http://127.0.0.1:9',
      WEBHOOKS_ALLOW_INSECURE: 'true',
      WEBHOOKS_ALLOW_PRIVATE: 'true',
      LOG_LEVEL: 'info',
      PLANS_FILE: plansFile(),
    });
    return new Stack(redis, gateway, `http://127.0.0.1:${adminPort}`);
  }

  async call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
    const started = Date.now();
    const res = await fetch(`${this.admin}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${ADMIN_TOKEN}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(30_000),
    });
    return { status: res.status, headers: res.headers, body: await res.text(), ms: Date.now() - started };
  }

  /**
   * A set-up call, sent again while it answers 503 (a create with one Idempotency-Key throughout,
   * so its retries make one): what a client does on a 503 with Retry-After.
   */
  async settled(method: string, path: string, body?: unknown): Promise<Answer> {
    const headers: Record<string, string> = method === 'POST' ? { 'idempotency-key': randomUUID() } : {};
    let answer: Answer | undefined;
    await vi.waitFor(
      async () => {
        answer = await this.call(method, path, body, headers);
        expect(answer.status, answer.body).not.toBe(503);
      },
      { timeout: 10_000, interval: 100 },
    );
    return answer!;
  }

  /** The audit lines the gateway logged for this action. */
  audits(action: string): Array<Record<string, unknown>> {
    return this.gateway.logs.flatMap((l) => (l.json?.audit === action ? [l.json] : []));
  }

  /**
   * Waits for an audit line of `action`: the process writes its log asynchronously, in order, so
   * once it is there every line logged before it is too.
   */
  async auditLogged(action: string): Promise<void> {
    await vi.waitFor(() => expect(this.audits(action).length).toBeGreaterThan(0), { timeout: 5_000, interval: 20 });
  }

  async stop(): Promise<void> {
    await this.gateway.kill();
    // SIGKILL ends a stopped (SIGSTOP) redis-server too.
    await this.redis.kill();
  }
}

beforeAll(() => {
  // The tests freeze and kill their own redis-server: REDIS_URL cannot stand in for it.
  redisServerBinary();
});

afterEach(async () => {
  await killAllServices();
});

describe('every admin route with Redis unreachable', () => {
  let stack: Stack;
  let fixtures: Fixtures;

  beforeEach(async () => {
    stack = await Stack.start();
    // Set-up, with Redis up: on a loaded host a command can still outlast this file's 200 ms
    // command timeout, and the route then answers 503 as it should (CI once got it for the
    // webhook). A client retries a 503; the Idempotency-Key makes the retried create one.
    const key = await stack.settled('POST', '/admin/keys', { plan: 'free' });
    const spare = await stack.settled('POST', '/admin/keys', { plan: 'free' });
    const hook = await stack.settled('POST', '/admin/webhooks', {
      url: 'http://127.0.0.1:9/hook',
      events: ['key.banned'],
    });
    const customer = await stack.settled('POST', '/admin/customers', { name: 'Acme', plan: 'pro', credits: {} });
    const lone = await stack.settled('POST', '/admin/keys', { plan: 'pro' });
    const creditKeyId = JSON.parse(lone.body).id;
    const terms = await stack.settled('PATCH', `/admin/keys/${creditKeyId}`, { credits: {} });
    expect([key.status, spare.status, hook.status, customer.status, terms.status]).toEqual([201, 201, 201, 201, 200]);
    fixtures = {
      keyId: JSON.parse(key.body).id,
      spareKeyId: JSON.parse(spare.body).id,
      creditKeyId,
      customerId: JSON.parse(customer.body).id,
      webhookId: JSON.parse(hook.body).id,
    };
  });

  afterEach(async () => {
    await stack?.stop();
  });

  /** Every row, one after the other: each answers as the table says, in time, never a 500. */
  async function expectTable(): Promise<void> {
    for (const [label, method, path, body, ok] of ROUTES) {
      const answer = await stack.call(method, path(fixtures), body);
      const context = `${label}: ${answer.status} in ${answer.ms} ms ${answer.body.slice(0, 160)}`;
      // Soft: one run reports every route that answers otherwise.
      expect.soft(answer.status, context).toBe(ok);
      expect.soft(answer.ms, context).toBeLessThan(BOUND_MS);
      if (ok !== 503 || answer.status !== 503) continue;
      expect.soft(answer.headers.get('content-type'), context).toMatch(/^application\/json/);
      const error = JSON.parse(answer.body);
      expect.soft(error, context).toEqual({ code: expect.any(String), message: expect.any(String), status: 503 });
      expect.soft(['store_unavailable', 'rate_limiter_unavailable'], context).toContain(error.code);
      expect.soft(error.message, context).not.toMatch(/timed out|ECONNREFUSED|stack|127\.0\.0\.1/);
      expect.soft(Number(answer.headers.get('retry-after')), context).toBeGreaterThanOrEqual(1);
    }
  }

  it('frozen (SIGSTOP): the routes that need it answer 503 with Retry-After, the others go on; all answer again once it thaws', async () => {
    stack.redis.freeze();
    try {
      await expectTable();
    } finally {
      stack.redis.thaw();
    }
    // Served again once it thaws (what the frozen writes did is the idempotency tests' business).
    const after = await stack.call('GET', '/admin/webhooks');
    expect(after.status, after.body).toBe(200);
  });

  it('dead (connection refused): the same answers, at once', async () => {
    await stack.redis.kill();
    await expectTable();
  });
});

describe('a create while Redis is frozen', () => {
  let stack: Stack;

  beforeEach(async () => {
    stack = await Stack.start();
  });

  afterEach(async () => {
    await stack?.stop();
  });

  /** A create sent while Redis is frozen: its answer, which must be a 503 with Retry-After. */
  async function frozenCreate(path: string, body: unknown, headers: Record<string, string> = {}): Promise<void> {
    stack.redis.freeze();
    let answer: Answer;
    try {
      answer = await stack.call('POST', path, body, headers);
    } finally {
      stack.redis.thaw();
    }
    expect(answer.status, answer.body).toBe(503);
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // A client retries once the store answers again: right after SIGCONT, Redis first works off
    // what queued while it was stopped, and a command may still time out (a 503, rightly).
    await vi.waitFor(async () => expect((await stack.call('GET', '/admin/webhooks')).status).toBe(200), {
      timeout: 10_000,
      interval: 50,
    });
  }

  it('a webhook endpoint: 503, then its retry with the same Idempotency-Key makes exactly one, whose secret signs its deliveries, audited once', async () => {
    const hook = await startReceiver();
    try {
      const key = randomUUID();
      const body = { url: hook.url, events: ['key.created'] };
      await frozenCreate('/admin/webhooks', body, { 'idempotency-key': key });

      const retried = await stack.call('POST', '/admin/webhooks', body, { 'idempotency-key': key });
      expect(retried.status, retried.body).toBe(201);
      const { id, secret } = JSON.parse(retried.body) as { id: string; secret: string };
      const again = await stack.call('POST', '/admin/webhooks', body, { 'idempotency-key': key });
      expect(again.status).toBe(201);
      expect(JSON.parse(again.body)).toEqual(JSON.parse(retried.body));

      const listed = JSON.parse((await stack.call('GET', '/admin/webhooks')).body) as Array<{ id: string }>;
      expect(listed.map((s) => s.id)).toEqual([id]);
      // The endpoint's deliveries are signed with the secret the caller was given.
      expect((await stack.call('POST', `/admin/webhooks/${id}/test`, {})).status).toBe(202);
      await stack.auditLogged('webhook.tested');
      expect(stack.audits('webhook.created').map((a) => a.webhookId)).toEqual([id]);
      await hook.until(1);
      const [delivery] = hook.received;
      expect(
        new Webhook(secret).verify(delivery?.body ?? '', delivery?.headers as Record<string, string>),
      ).toMatchObject({
        type: 'webhook.test',
        data: { webhookId: id },
      });
    } finally {
      await hook.close();
    }
  });

  it('a webhook endpoint without an Idempotency-Key: 503, and nothing is left once Redis thaws', async () => {
    await frozenCreate('/admin/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['key.created'] });
    const listed = await stack.call('GET', '/admin/webhooks');
    expect(listed.status).toBe(200);
    expect(JSON.parse(listed.body)).toEqual([]);
  });

  it('an API key: 503, then its retry with the same Idempotency-Key makes exactly one, whose plaintext the caller has, audited once', async () => {
    const key = randomUUID();
    await frozenCreate('/admin/keys', { plan: 'pro', name: 'retried' }, { 'idempotency-key': key });
    const retried = await stack.call(
      'POST',
      '/admin/keys',
      { plan: 'pro', name: 'retried' },
      { 'idempotency-key': key },
    );
    expect(retried.status, retried.body).toBe(201);
    const created = JSON.parse(retried.body) as { id: string; key: string };
    expect(created.key).toMatch(/^ask_/);
    const listed = (
      JSON.parse((await stack.call('GET', '/admin/keys?name=retried')).body) as {
        items: Array<{ id: string; name: string }>;
      }
    ).items;
    expect(listed.filter((k) => k.name === 'retried').map((k) => k.id)).toEqual([created.id]);
    expect((await stack.call('DELETE', `/admin/keys/${created.id}`)).status).toBe(204);
    await stack.auditLogged('key.revoked');
    expect(stack.audits('key.created').map((a) => a.keyId)).toEqual([created.id]);
  });
});
