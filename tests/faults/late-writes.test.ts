import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startReceiver } from '@animal-store/gateway/test/support/webhook-receiver.js';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { RedisProcess, redisServerBinary } from '../support/redis.js';
import { freePort } from '../support/runtime.js';
import { killAllServices, ServiceProcess } from '../support/service-process.js';

/**
 * An admin or portal write answered 503 in a Redis stall must not happen later: a command the
 * gateway gave up on still waits in Redis's socket (or its queue) and runs when Redis resumes,
 * and a caller retrying a top-up as the 503 tells it would otherwise credit twice. Two stalls:
 * frozen (SIGSTOP: nothing answers), and writes held (CLIENT PAUSE WRITE: the gateway's reads
 * still answer, so the write itself is what waits inside Redis and runs after its deadline).
 * A gateway process on a Redis of this file's own, which it freezes. Webhook endpoints likewise:
 * created, changed, rotated or removed, and pinged (a ping answered 503 is never delivered).
 */

const ADMIN_TOKEN = 'faults-late-writes-token-0123';
const COMMAND_TIMEOUT_MS = 200;
/** How long CLIENT PAUSE holds writes at most: longer than any request here; each test unpauses. */
const PAUSE_MS = 10_000;

type Stall = 'frozen' | 'writes paused';

interface Answer {
  status: number;
  headers: Headers;
  body: string;
}

/** A plan with a price and credits, so that customers and lone keys on it can hold a balance. */
function plansFile(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'late-writes-')), 'plans.json');
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

let redis: RedisProcess;
/** The test's own connection to that Redis: CLIENT PAUSE, and what it holds. */
let inspect: Redis;
let admin: string;
let portal: string;

beforeAll(async () => {
  // The file freezes its own redis-server: REDIS_URL cannot stand in for it.
  redisServerBinary();
  redis = await RedisProcess.start();
  inspect = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  const [adminPort, portalPort] = [await freePort(), await freePort()];
  await ServiceProcess.start('gateway', {
    REDIS_URL: redis.url,
    REDIS_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS),
    ADMIN_TOKEN,
    ADMIN_PORT: String(adminPort),
    PORTAL_PORT: String(portalPort),
    PETS_URL: 'http://127.0.0.1:9',
    LOG_LEVEL: 'info',
    PLANS_FILE: plansFile(),
    WEBHOOKS_ALLOW_INSECURE: 'true',
    WEBHOOKS_ALLOW_PRIVATE: 'true',
    // A ping not yet confirmed by its request is looked at again soon.
    WEBHOOKS_RETRY_BASE_MS: '200',
    WEBHOOKS_RETRY_MAX_DELAY_MS: '400',
  });
  admin = `http://127.0.0.1:${adminPort}`;
  portal = `http://127.0.0.1:${portalPort}`;
});

afterAll(async () => {
  await killAllServices();
  inspect?.disconnect();
  // SIGKILL ends a stopped (SIGSTOP) redis-server too.
  await redis?.kill();
});

async function call(method: string, path: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`${admin}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${ADMIN_TOKEN}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

/** A set-up call, sent again while it answers 503 (a loaded host can outlast 200 ms), as a client would. */
async function settled(method: string, path: string, body?: unknown): Promise<Answer> {
  let answer: Answer | undefined;
  await vi.waitFor(
    async () => {
      answer = await call(method, path, body);
      expect(answer.status, answer.body).not.toBe(503);
    },
    { timeout: 10_000, interval: 100 },
  );
  return answer as Answer;
}

/** A visit of a sign-in link, as a browser makes it (the 303 to the portal is the sign-in). */
async function visit(url: string): Promise<Answer> {
  const res = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(30_000) });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

/**
 * `request` sent while Redis stalls, which must answer 503 with Retry-After; then Redis resumes and
 * has worked off everything it held (the next admin call that reaches it answers after those, on
 * the same connection), before `after` runs.
 */
async function inStall<T>(stall: Stall, request: () => Promise<Answer>, after: () => Promise<T>): Promise<T> {
  if (stall === 'frozen') redis.freeze();
  else await inspect.call('CLIENT', 'PAUSE', String(PAUSE_MS), 'WRITE');
  let answer: Answer;
  try {
    answer = await request();
  } finally {
    if (stall === 'frozen') redis.thaw();
    else await inspect.call('CLIENT', 'UNPAUSE');
  }
  expect(answer.status, answer.body).toBe(503);
  expect(JSON.parse(answer.body)).toMatchObject({ code: 'store_unavailable', status: 503 });
  expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  await vi.waitFor(async () => expect((await call('GET', '/admin/webhooks')).status).toBe(200), {
    timeout: 10_000,
    interval: 50,
  });
  return after();
}

async function balanceOf(path: string): Promise<number> {
  const answer = await settled('GET', `${path}/credits`);
  expect(answer.status, answer.body).toBe(200);
  return JSON.parse(answer.body).balance;
}

describe.each<Stall>(['frozen', 'writes paused'])('Redis %s', (stall) => {
  it('a customer’s top-up answered 503 never lands: the balance stays, and the retry adds it once', async () => {
    const created = await settled('POST', '/admin/customers', { name: 'Acme', plan: 'pro', credits: {} });
    expect(created.status, created.body).toBe(201);
    const path = `/admin/customers/${JSON.parse(created.body).id}`;
    const topUp = { amount: 5, reason: 'order 1' };
    const before = await balanceOf(path);
    const after = await inStall(
      stall,
      () => call('POST', `${path}/credits`, topUp),
      () => balanceOf(path),
    );
    expect(after).toBe(before);
    // The caller does what the 503 said: it retries, and the credits are there once.
    expect((await settled('POST', `${path}/credits`, topUp)).status).toBe(201);
    expect(await balanceOf(path)).toBe(before + 5);
  });

  it('a lone key’s top-up answered 503 never lands', async () => {
    const created = await settled('POST', '/admin/keys', { plan: 'pro' });
    expect(created.status, created.body).toBe(201);
    const path = `/admin/keys/${JSON.parse(created.body).id}`;
    expect((await settled('PATCH', path, { credits: {} })).status).toBe(200);
    const before = await balanceOf(path);
    const after = await inStall(
      stall,
      () => call('POST', `${path}/credits`, { amount: 5, reason: 'order 2' }),
      () => balanceOf(path),
    );
    expect(after).toBe(before);
  });

  it('a portal sign-in link answered 503 is never written', async () => {
    const created = await settled('POST', '/admin/customers', { name: 'Links', plan: 'pro' });
    const path = `/admin/customers/${JSON.parse(created.body).id}/portal-sessions`;
    const links = await inStall(
      stall,
      () => call('POST', path),
      () => inspect.keys('*portal:link:*'),
    );
    expect(links).toEqual([]);
  });

  it('a sign-in whose visit answered 503 leaves its link usable: it signs in once Redis is back', async () => {
    const created = await settled('POST', '/admin/customers', { name: 'Visits', plan: 'pro' });
    const link = await settled('POST', `/admin/customers/${JSON.parse(created.body).id}/portal-sessions`);
    expect(link.status, link.body).toBe(201);
    const url = new URL(JSON.parse(link.body).url);
    const entry = `${portal}${url.pathname}${url.search}`;
    const sessionsBefore = (await inspect.keys('*portal:session:*')).length;
    const again = await inStall(
      stall,
      () => visit(entry),
      () => visit(entry),
    );
    expect(again.status, again.body).toBe(303);
    expect(again.headers.get('set-cookie')).toMatch(/./);
    // One session: the visit answered 503 made none.
    expect((await inspect.keys('*portal:session:*')).length).toBe(sessionsBefore + 1);
  });
});

// With REDIS_URL and no MONGO_URL, keys and customers are records in Redis (redis/redis-records.ts).
describe.each<Stall>(['frozen', 'writes paused'])('keys and customers kept in Redis, Redis %s', (stall) => {
  const listed = async (path: string): Promise<Array<{ id: string; name: string; revokedAt?: string }>> =>
    JSON.parse((await settled('GET', path)).body).items;

  it('a key creation answered 503 leaves no key', async () => {
    const name = `late-key-${stall.replace(' ', '-')}`;
    const after = await inStall(
      stall,
      () => call('POST', '/admin/keys', { plan: 'pro', name }),
      () => listed(`/admin/keys?name=${name}`),
    );
    expect(after).toEqual([]);
  });

  it('a revocation answered 503 never lands: the key still authenticates', async () => {
    const created = await settled('POST', '/admin/keys', { plan: 'pro' });
    expect(created.status, created.body).toBe(201);
    const { id } = JSON.parse(created.body);
    const after = await inStall(
      stall,
      () => call('DELETE', `/admin/keys/${id}`),
      () => settled('GET', `/admin/keys/${id}`),
    );
    expect(JSON.parse(after.body).revokedAt).toBeUndefined();
  });

  it('a customer creation answered 503 leaves no customer: the retry with its externalId is a 201', async () => {
    const body = { name: 'Late Ltd', plan: 'pro', externalId: `cus_late_${stall.replace(' ', '_')}` };
    const after = await inStall(
      stall,
      () => call('POST', '/admin/customers', body),
      () => settled('POST', '/admin/customers', body),
    );
    expect(after.status, after.body).toBe(201);
  });
});

describe.each<Stall>(['frozen', 'writes paused'])('webhook endpoints, Redis %s', (stall) => {
  let hook: Awaited<ReturnType<typeof startReceiver>>;
  beforeAll(async () => {
    hook = await startReceiver();
  });
  afterAll(async () => {
    await hook?.close();
  });

  interface Endpoint {
    id: string;
    secret: string;
    description: string;
    previousSecretExpiresAt?: string;
  }

  async function endpoint(): Promise<Endpoint> {
    const created = await settled('POST', '/admin/webhooks', {
      url: hook.url,
      events: ['key.created'],
      description: 'before',
    });
    expect(created.status, created.body).toBe(201);
    return JSON.parse(created.body);
  }

  async function shown(id: string): Promise<Answer> {
    return settled('GET', `/admin/webhooks/${id}`);
  }

  it('a creation answered 503 leaves no endpoint', async () => {
    const before = JSON.parse((await settled('GET', '/admin/webhooks')).body).length;
    const after = await inStall(
      stall,
      () => call('POST', '/admin/webhooks', { url: hook.url, events: ['key.created'] }),
      async () => JSON.parse((await settled('GET', '/admin/webhooks')).body).length,
    );
    expect(after).toBe(before);
  });

  it('a change answered 503 never lands', async () => {
    const { id } = await endpoint();
    const after = await inStall(
      stall,
      () => call('PATCH', `/admin/webhooks/${id}`, { description: 'after' }),
      () => shown(id),
    );
    expect(JSON.parse(after.body)).toMatchObject({ id, description: 'before' });
  });

  it('a secret rotation answered 503 never lands: the secret shown at creation still signs alone', async () => {
    const { id } = await endpoint();
    const after = await inStall(
      stall,
      () => call('POST', `/admin/webhooks/${id}/rotate`),
      () => shown(id),
    );
    expect(JSON.parse(after.body).previousSecretExpiresAt).toBeUndefined();
  });

  it('a removal answered 503 never lands: the endpoint stays', async () => {
    const { id } = await endpoint();
    const after = await inStall(
      stall,
      () => call('DELETE', `/admin/webhooks/${id}`),
      () => call('GET', `/admin/webhooks/${id}`),
    );
    expect(after.status, after.body).toBe(200);
  });

  it('a ping answered 503 is never delivered; the retry is, once', async () => {
    const { id } = await endpoint();
    const completed = () => inspect.zcard('{gw:webhooks}:deliveries:completed');
    const done = await completed();
    const deliveries = hook.received.length;
    await inStall(
      stall,
      () => call('POST', `/admin/webhooks/${id}/test`),
      async () => {},
    );
    const retry = await settled('POST', `/admin/webhooks/${id}/test`);
    expect(retry.status, retry.body).toBe(202);
    // Both pings' jobs are done: the retry's, and (writes paused: its queuing landed once Redis
    // resumed) the one answered 503, dropped. Frozen, that one never reached the queue.
    await vi.waitFor(async () => expect(await completed()).toBe(done + (stall === 'frozen' ? 1 : 2)), {
      timeout: 15_000,
      interval: 50,
    });
    const pings = hook.received.slice(deliveries).map((r) => r.headers['webhook-id']);
    expect(pings).toEqual([JSON.parse(retry.body).eventId]);
  }, 30_000);
});
