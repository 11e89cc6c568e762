import { EventEmitter, once } from 'node:events';
import { RedisProcess } from '@animal-store/tests/support/redis.js';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { MemoryCustomerStore } from '../../src/customers/memory-customer-store.js';
import type { ChangedKey } from '../../src/keys/key-store.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import {
  ADMIN_TOKEN,
  addKey,
  bearer,
  connected,
  redisClient,
  redisReady,
  startEchoUpstream,
  startGateway,
  type TestGateway,
} from '../support/helpers.js';

/**
 * Two gateway instances on real sockets, sharing one Redis (and one key store, standing in for
 * MongoDB), as two replicas of one deployment would. This suite owns its redis-server so it can
 * read Redis's own command counts.
 */
let redis: RedisProcess;
let upstream: Awaited<ReturnType<typeof startEchoUpstream>>;
const open: TestGateway[] = [];

beforeAll(async () => {
  redis = await RedisProcess.start();
  upstream = await startEchoUpstream();
});
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(open.splice(0).map((g) => g.close()));
});
afterAll(async () => {
  // Unset when beforeAll failed: that failure is the one to report, not a TypeError here.
  await upstream?.close();
  await redis?.stop();
});

/** The shared store, saying each time a replica has polled it for changed keys. */
class PolledKeyStore extends MemoryKeyStore {
  readonly polls = new EventEmitter();
  override async changedSince(since: Date): Promise<ChangedKey[]> {
    const changed = await super.changedSince(since);
    queueMicrotask(() => this.polls.emit('poll'));
    return changed;
  }
}

async function replicas(
  env: Record<string, string> = {},
  options: { pubsub?: boolean; keyStore?: MemoryKeyStore } = {},
) {
  const keyStore = options.keyStore ?? new MemoryKeyStore();
  // Customers too are shared, as MongoDB would share them.
  const customerStore = new MemoryCustomerStore();
  const prefix = `r${Date.now()}${Math.random().toString(36).slice(2, 6)}:`;
  const make = async () => {
    const gw = await startGateway({
      redisUrl: redis.url,
      upstream: upstream.url,
      prefix,
      // Ban mechanics here are the point, not the grace after a window fills (its own test below).
      env: { BAN_GRACE_MS: '0', ...env },
      keyStore,
      customerStore,
      pubsub: options.pubsub ?? true,
    });
    open.push(gw);
    await gw.listen();
    return gw;
  };
  const a = await make();
  const b = await make();
  return { a, b, keyStore };
}

/** The poll at its longest (REVOCATION_POLL_MS), so only pub/sub can be what brings a change. */
const POLL_MAX = '60000';

/**
 * Each way a change reaches another replica, with the other one off: pub/sub with the key store
 * poll at its longest, and the poll alone with no subscriber at all.
 */
const PATHS = [
  ['pub/sub alone, the poll at its maximum', { env: { REVOCATION_POLL_MS: POLL_MAX }, pubsub: true, within: 1_000 }],
  ['the poll alone, no subscriber', { env: { REVOCATION_POLL_MS: '500' }, pubsub: false, within: 5_000 }],
] as const;

async function subscribedGauge(gw: TestGateway): Promise<number> {
  const match = /^gateway_event_bus_subscribed(?:\{[^}]*\})? (\d+)$/m.exec(await gw.deps.registry.metrics());
  return Number(match?.[1]);
}

/** A key banned on A (limit 1 a minute, BAN_THRESHOLD 1) whose ban B has seen and now remembers. */
async function banOnBoth(a: TestGateway, b: TestGateway): Promise<{ id: string; key: string }> {
  const added = await addKey(a.deps, 'enterprise', { perMinute: 1, perDay: 100 });
  expect((await get(a, added.key)).status).toBe(200);
  expect((await get(a, added.key)).code).toBe('rate_limit_exceeded');
  expect((await get(a, added.key)).code).toBe('api_key_banned');
  expect((await get(b, added.key)).code).toBe('api_key_banned');
  return added;
}

async function get(gw: TestGateway, key: string) {
  const res = await fetch(`${gw.url}/v1/pets`, { headers: bearer(key) });
  const body = (await res.json()) as { code?: string };
  return { status: res.status, code: body.code, headers: res.headers };
}

async function evalshaCalls(): Promise<number> {
  const client = await connected(redisClient(redis.url));
  const stats = await client.info('commandstats');
  client.disconnect();
  const match = /cmdstat_evalsha:calls=(\d+)/.exec(stats);
  return match ? Number(match[1]) : 0;
}

describe('two gateway replicas sharing one Redis', () => {
  it('share a ban: once banned on one, the other refuses too, then answers from memory with no Redis call', async () => {
    const { a, b } = await replicas({ BAN_THRESHOLD: '3', BAN_SECONDS: '900' });
    const { id, key } = await addKey(a.deps, 'enterprise', { perMinute: 1, perDay: 100 });
    expect((await get(a, key)).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await get(a, key)).code).toBe('rate_limit_exceeded');
    expect((await get(a, key)).code).toBe('api_key_banned');

    const first = await get(b, key);
    expect(first.code).toBe('api_key_banned');
    expect(Number(first.headers.get('retry-after'))).toBeGreaterThan(880);

    const before = await evalshaCalls();
    for (let i = 0; i < 20; i++) expect((await get(b, key)).code).toBe('api_key_banned');
    for (let i = 0; i < 20; i++) expect((await get(a, key)).code).toBe('api_key_banned');
    expect(await evalshaCalls()).toBe(before);

    // Lifting the ban on one replica's admin API frees the key on both.
    const lift = await a.admin.inject({ method: 'DELETE', url: `/admin/keys/${id}/ban`, headers: bearer(ADMIN_TOKEN) });
    expect(lift.statusCode).toBe(204);
    await vi.waitFor(async () => expect((await get(b, key)).code).toBe('rate_limit_exceeded'), { timeout: 5_000 });
    expect((await get(a, key)).code).toBe('rate_limit_exceeded');
  });

  it('drop what they remember of bans after their subscription was down, so a lift they missed still frees the key', async () => {
    // The poll at its longest: its recheck of remembered bans cannot be what frees the key.
    const { a, b } = await replicas({ BAN_THRESHOLD: '1', BAN_SECONDS: '900', REVOCATION_POLL_MS: POLL_MAX });
    const { id, key } = await addKey(a.deps, 'enterprise', { perMinute: 1, perDay: 100 });
    expect((await get(a, key)).status).toBe(200);
    expect((await get(a, key)).code).toBe('rate_limit_exceeded');
    expect((await get(a, key)).code).toBe('api_key_banned');
    expect((await get(b, key)).code).toBe('api_key_banned');

    // B's subscription drops; the lift published meanwhile never reaches it.
    const subscriber = b.subscriber;
    if (!subscriber) throw new Error('replica b has no subscriber');
    subscriber.disconnect();
    const lift = await a.admin.inject({ method: 'DELETE', url: `/admin/keys/${id}/ban`, headers: bearer(ADMIN_TOKEN) });
    expect(lift.statusCode).toBe(204);
    expect((await get(b, key)).code).toBe('api_key_banned');

    await subscriber.connect();
    await vi.waitFor(async () => expect((await get(b, key)).code).toBe('rate_limit_exceeded'), { timeout: 5_000 });
  });

  it.each(PATHS)('revoke a key on every replica (through %s)', async (_label, path) => {
    const { a, b } = await replicas(path.env, { pubsub: path.pubsub });
    const { id, key } = await addKey(a.deps, 'pro');
    expect((await get(a, key)).status).toBe(200);
    expect((await get(b, key)).status).toBe(200);
    const revoke = await a.admin.inject({ method: 'DELETE', url: `/admin/keys/${id}`, headers: bearer(ADMIN_TOKEN) });
    expect(revoke.statusCode).toBe(204);
    expect((await get(a, key)).code).toBe('invalid_api_key');
    await vi.waitFor(async () => expect((await get(b, key)).code).toBe('invalid_api_key'), {
      timeout: path.within,
      interval: 50,
    });
  });

  it.each(PATHS)('apply a plan change on every replica, counts carried over (through %s)', async (_label, path) => {
    const { a, b } = await replicas(path.env, { pubsub: path.pubsub });
    const { id, key } = await addKey(a.deps, 'free');
    for (let i = 0; i < 25; i++) {
      expect((await get(a, key)).status).toBe(200);
      expect((await get(b, key)).status).toBe(200);
    }
    const change = await a.admin.inject({
      method: 'PATCH',
      url: `/admin/keys/${id}`,
      headers: bearer(ADMIN_TOKEN),
      payload: { plan: 'pro' },
    });
    expect(change.statusCode).toBe(200);
    expect((await get(a, key)).headers.get('x-ratelimit-remaining')).toBe('249');
    await vi.waitFor(async () => expect((await get(b, key)).headers.get('x-ratelimit-limit')).toBe('300'), {
      timeout: path.within,
      interval: 50,
    });
    // Still one count for both replicas under the new plan.
    const onA = Number((await get(a, key)).headers.get('x-ratelimit-remaining'));
    expect((await get(b, key)).headers.get('x-ratelimit-remaining')).toBe(String(onA - 1));
  });

  it.each(PATHS)('apply a change to a key’s customer on every replica (through %s)', async (_label, path) => {
    const { a, b } = await replicas(path.env, { pubsub: path.pubsub });
    const admin = (method: 'POST' | 'PATCH', url: string, payload: object) =>
      a.admin.inject({ method, url, headers: bearer(ADMIN_TOKEN), payload });
    const customer = (await admin('POST', '/admin/customers', { name: 'Acme', plan: 'free' })).json();
    const made = await admin('POST', '/admin/keys', { customerId: customer.id });
    expect(made.statusCode).toBe(201);
    const key = made.json().key as string;
    expect((await get(b, key)).headers.get('ratelimit-policy')).toContain('"customer-minute";q=60;w=60');
    const change = await admin('PATCH', `/admin/customers/${customer.id}`, {
      limits: { perMinute: 7 },
      billing: { anchorDay: 1, timeZone: 'Pacific/Kiritimati' },
    });
    expect(change.statusCode).toBe(200);
    expect((await get(a, key)).headers.get('ratelimit-policy')).toContain('"customer-minute";q=7;w=60');
    await vi.waitFor(
      async () => expect((await get(b, key)).headers.get('ratelimit-policy')).toContain('"customer-minute";q=7;w=60'),
      { timeout: path.within, interval: 50 },
    );
  });

  it.each(PATHS)('apply a scope and address change on every replica (through %s)', async (_label, path) => {
    const { a, b } = await replicas(path.env, { pubsub: path.pubsub });
    const { id, key } = await addKey(a.deps, 'pro');
    expect((await get(a, key)).status).toBe(200);
    expect((await get(b, key)).status).toBe(200);
    const change = await a.admin.inject({
      method: 'PATCH',
      url: `/admin/keys/${id}`,
      headers: bearer(ADMIN_TOKEN),
      payload: { scopes: ['pets:write'] },
    });
    expect(change.statusCode).toBe(200);
    expect((await get(a, key)).code).toBe('insufficient_scope');
    await vi.waitFor(async () => expect((await get(b, key)).code).toBe('insufficient_scope'), {
      timeout: path.within,
      interval: 50,
    });
    const moved = await a.admin.inject({
      method: 'PATCH',
      url: `/admin/keys/${id}`,
      headers: bearer(ADMIN_TOKEN),
      payload: { scopes: null, allowedCidrs: ['192.0.2.0/24'] },
    });
    expect(moved.statusCode).toBe(200);
    expect((await get(a, key)).code).toBe('ip_not_allowed');
    await vi.waitFor(async () => expect((await get(b, key)).code).toBe('ip_not_allowed'), {
      timeout: path.within,
      interval: 50,
    });
  });

  it.each(PATHS)('end a rotated-out secret on every replica (through %s)', async (_label, path) => {
    const { a, b } = await replicas(path.env, { pubsub: path.pubsub });
    const { id, key: old } = await addKey(a.deps, 'pro');
    expect((await get(a, old)).status).toBe(200);
    expect((await get(b, old)).status).toBe(200);
    const rotated = await a.admin.inject({
      method: 'POST',
      url: `/admin/keys/${id}/rotate`,
      headers: bearer(ADMIN_TOKEN),
      payload: { gracePeriodSeconds: 0 },
    });
    expect(rotated.statusCode).toBe(200);
    const fresh = rotated.json().key as string;
    expect((await get(a, old)).code).toBe('expired_api_key');
    expect((await get(b, fresh)).status).toBe(200);
    await vi.waitFor(async () => expect((await get(b, old)).code).toBe('expired_api_key'), {
      timeout: path.within,
      interval: 50,
    });
  });

  it.each(PATHS)('lift a ban on every replica, including one that remembers it (through %s)', async (_label, path) => {
    const { a, b } = await replicas({ ...path.env, BAN_THRESHOLD: '1', BAN_SECONDS: '900' }, { pubsub: path.pubsub });
    const { id, key } = await banOnBoth(a, b);
    const lift = await a.admin.inject({ method: 'DELETE', url: `/admin/keys/${id}/ban`, headers: bearer(ADMIN_TOKEN) });
    expect(lift.statusCode).toBe(204);
    // Asked of B alone: with BAN_THRESHOLD 1 a second refusal anywhere would ban the key again.
    await vi.waitFor(async () => expect((await get(b, key)).code).toBe('rate_limit_exceeded'), {
      timeout: path.within,
      interval: 50,
    });
  });

  it.each(PATHS)('apply a revocation and a ban lift after Redis restarts (through %s)', async (_label, path) => {
    const { a, b } = await replicas({ ...path.env, BAN_THRESHOLD: '1', BAN_SECONDS: '900' }, { pubsub: path.pubsub });
    const revoked = await addKey(a.deps, 'pro');
    expect((await get(b, revoked.key)).status).toBe(200);
    await redis.kill();
    await redis.restart();
    // Back on Redis and, with pub/sub, subscribed again (no request failed meanwhile, so the
    // limiter goes straight back to Redis).
    for (const gw of [a, b]) {
      await vi.waitFor(() => expect(redisReady(gw)).toBe(true), { timeout: 10_000 });
      if (path.pubsub) await vi.waitFor(async () => expect(await subscribedGauge(gw)).toBe(1), { timeout: 10_000 });
    }
    const { id, key } = await banOnBoth(a, b);

    const revoke = await a.admin.inject({
      method: 'DELETE',
      url: `/admin/keys/${revoked.id}`,
      headers: bearer(ADMIN_TOKEN),
    });
    expect(revoke.statusCode).toBe(204);
    const lift = await a.admin.inject({ method: 'DELETE', url: `/admin/keys/${id}/ban`, headers: bearer(ADMIN_TOKEN) });
    expect(lift.statusCode).toBe(204);
    await vi.waitFor(
      async () => {
        expect((await get(b, revoked.key)).code).toBe('invalid_api_key');
        expect((await get(b, key)).code).toBe('rate_limit_exceeded');
      },
      { timeout: path.within, interval: 50 },
    );
  });

  it("forget only the lifted key's ban, answering other banned keys from memory still (through pub/sub alone)", async () => {
    const { a, b } = await replicas({ BAN_THRESHOLD: '1', BAN_SECONDS: '900', REVOCATION_POLL_MS: POLL_MAX });
    const lifted = await banOnBoth(a, b);
    const other = await banOnBoth(a, b);
    const lift = await a.admin.inject({
      method: 'DELETE',
      url: `/admin/keys/${lifted.id}/ban`,
      headers: bearer(ADMIN_TOKEN),
    });
    expect(lift.statusCode).toBe(204);
    await vi.waitFor(async () => expect((await get(b, lifted.key)).code).toBe('rate_limit_exceeded'), {
      timeout: 1_000,
      interval: 50,
    });
    const before = await evalshaCalls();
    expect((await get(b, other.key)).code).toBe('api_key_banned');
    expect(await evalshaCalls()).toBe(before);
  });

  it('say when the subscription is lost and when it is back, in a gauge and the log', async () => {
    const logs: Record<string, unknown>[] = [];
    const keyStore = new MemoryKeyStore();
    const prefix = `s${Date.now()}:`;
    const gw = await startGateway({
      redisUrl: redis.url,
      upstream: upstream.url,
      prefix,
      keyStore,
      logs,
      eventProbeMs: 100,
    });
    open.push(gw);
    expect(await subscribedGauge(gw)).toBe(1);
    expect(logs.filter((l) => String(l.msg).startsWith('key events: subscribed'))).toHaveLength(1);

    const subscriber = gw.subscriber;
    if (!subscriber) throw new Error('no subscriber');
    subscriber.disconnect();
    await vi.waitFor(async () => expect(await subscribedGauge(gw)).toBe(0), { timeout: 5_000 });
    const lost = logs.filter((l) => String(l.msg).startsWith('key events: not subscribed'));
    expect(lost).toHaveLength(1);
    expect(lost[0]?.level).toBe(40);

    // Down for a few probes, each published and never heard: they must not count once it is back.
    const watcher = await connected(redisClient(redis.url));
    const probes = new EventEmitter();
    watcher.on('message', (_channel: string, message: string) => {
      if (message.startsWith('{"probe"')) probes.emit('probe');
    });
    await watcher.subscribe(`${prefix}events`);
    for (let i = 0; i < 3; i++) await once(probes, 'probe');

    await subscriber.connect();
    await vi.waitFor(async () => expect(await subscribedGauge(gw)).toBe(1), { timeout: 5_000 });
    expect(logs.filter((l) => String(l.msg).startsWith('key events: subscription back'))).toHaveLength(1);
    // Probes go by and come back: up it stays, lost it was once.
    for (let i = 0; i < 4; i++) await once(probes, 'probe');
    watcher.disconnect();
    expect(await subscribedGauge(gw)).toBe(1);
    expect(logs.filter((l) => String(l.msg).startsWith('key events: not subscribed'))).toHaveLength(1);
  });

  it('subscribe once Redis allows it, after refusing the subscription at start (a probe retries it)', async () => {
    const admin = await connected(redisClient(redis.url));
    const user = `gw${Date.now()}`;
    // An ACL that lets the gateway use Redis but no pub/sub channel, fixed while it runs.
    await admin.call('ACL', 'SETUSER', user, 'on', '>secret-pw', '~*', '+@all', 'resetchannels');
    try {
      const prefix = `acl${Date.now()}:`;
      const url = `redis://${user}:secret-pw@127.0.0.1:${redis.port}`;
      const keyStore = new MemoryKeyStore();
      const logs: Record<string, unknown>[] = [];
      const make = async (extra: { logs?: Record<string, unknown>[] } = {}) => {
        const gw = await startGateway({
          redisUrl: url,
          upstream: upstream.url,
          prefix,
          keyStore,
          eventProbeMs: 100,
          waitForSubscription: false,
          env: { REVOCATION_POLL_MS: POLL_MAX },
          ...extra,
        });
        open.push(gw);
        await gw.listen();
        return gw;
      };
      const a = await make();
      const b = await make({ logs });
      await vi.waitFor(() => expect(logs.some((l) => String(l.msg).includes('NOPERM'))).toBe(true), { timeout: 5_000 });
      expect(await subscribedGauge(b)).toBe(0);

      await admin.call('ACL', 'SETUSER', user, 'allchannels');
      for (const gw of [a, b])
        await vi.waitFor(async () => expect(await subscribedGauge(gw)).toBe(1), { timeout: 5_000 });
      const { id, key } = await addKey(a.deps, 'pro');
      expect((await get(b, key)).status).toBe(200);
      const revoke = await a.admin.inject({ method: 'DELETE', url: `/admin/keys/${id}`, headers: bearer(ADMIN_TOKEN) });
      expect(revoke.statusCode).toBe(204);
      await vi.waitFor(async () => expect((await get(b, key)).code).toBe('invalid_api_key'), {
        timeout: 1_000,
        interval: 50,
      });
    } finally {
      await admin.call('ACL', 'DELUSER', user);
      admin.disconnect();
    }
  });

  it('apply a change stamped by a replica whose clock runs 10 s behind, by the poll alone', async () => {
    const keyStore = new PolledKeyStore();
    const prefix = `k${Date.now()}:`;
    const make = async (now?: () => number) => {
      const gw = await startGateway({
        redisUrl: redis.url,
        upstream: upstream.url,
        prefix,
        keyStore,
        pubsub: false,
        env: { REVOCATION_POLL_MS: '200' },
        ...(now ? { now } : {}),
      });
      open.push(gw);
      await gw.listen();
      return gw;
    };
    const behind = await make(() => Date.now() - 10_000);
    const b = await make();
    const { id, key } = await addKey(behind.deps, 'pro');
    expect((await get(b, key)).status).toBe(200);
    // Polls go by first: the next one starts well after the revocation's stamp, 10 s back.
    for (let i = 0; i < 4; i++) await once(keyStore.polls, 'poll');
    const revoke = await behind.admin.inject({
      method: 'DELETE',
      url: `/admin/keys/${id}`,
      headers: bearer(ADMIN_TOKEN),
    });
    expect(revoke.statusCode).toBe(204);
    await vi.waitFor(async () => expect((await get(b, key)).code).toBe('invalid_api_key'), {
      timeout: 5_000,
      interval: 100,
    });
  });

  it('after a key change, look it up in the store once more per replica, not again at every poll', async () => {
    const keyStore = new PolledKeyStore();
    const { a, b } = await replicas({ REVOCATION_POLL_MS: '100' }, { pubsub: false, keyStore });
    const { id, key } = await addKey(a.deps, 'free');
    expect((await get(b, key)).status).toBe(200);
    const change = await a.admin.inject({
      method: 'PATCH',
      url: `/admin/keys/${id}`,
      headers: bearer(ADMIN_TOKEN),
      payload: { plan: 'pro' },
    });
    expect(change.statusCode).toBe(200);
    await vi.waitFor(async () => expect((await get(b, key)).headers.get('x-ratelimit-limit')).toBe('300'), {
      timeout: 5_000,
      interval: 50,
    });
    const lookups = async () =>
      /gateway_key_store_duration_seconds_count\{[^}]*operation="findByHash",outcome="ok"[^}]*\} (\d+)\n/.exec(
        await b.deps.registry.metrics(),
      )?.[1];
    const afterChange = await lookups();
    // The change stays in every poll's window (30 s of clock slack): twenty polls, a request after each.
    for (let i = 0; i < 20; i++) {
      await once(keyStore.polls, 'poll');
      expect((await get(b, key)).status).toBe(200);
    }
    expect(await lookups()).toBe(afterChange);
  });

  it('look a known key up in the store once per replica, not once per request', async () => {
    const { a, b } = await replicas();
    const { key } = await addKey(a.deps, 'business');
    for (let i = 0; i < 25; i++) {
      expect((await get(a, key)).status).toBe(200);
      expect((await get(b, key)).status).toBe(200);
    }
    for (const gw of [a, b]) {
      const metrics = await gw.deps.registry.metrics();
      expect(metrics).toMatch(
        /gateway_key_store_duration_seconds_count\{[^}]*operation="findByHash",outcome="ok"[^}]*\} 1\n/,
      );
    }
  });
});

/**
 * A shared store whose change polls can be made to fail, or to wait until released; it counts
 * them and says when each has answered.
 */
class ControlledKeyStore extends MemoryKeyStore {
  readonly polls = new EventEmitter();
  calls = 0;
  failing = false;
  private held: Promise<void> | undefined;

  /** Holds the next polls until the returned function is called. */
  hold(): () => void {
    let release = () => {};
    this.held = new Promise<void>((resolve) => {
      release = resolve;
    });
    return () => {
      this.held = undefined;
      release();
    };
  }

  override async changedSince(since: Date): Promise<ChangedKey[]> {
    this.calls++;
    try {
      if (this.held) await this.held;
      if (this.failing) throw new Error('key store unreachable');
      return await super.changedSince(since);
    } finally {
      queueMicrotask(() => this.polls.emit('poll'));
    }
  }
}

/** Lets callbacks queued by what already happened run (no time passes). */
const settled = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("a replica's poll of the key store, on a fake clock (REVOCATION_POLL_MS 1000, no pub/sub)", () => {
  const POLL_MS = 1_000;
  /** The replicas of one test share a prefix (one deployment); each test has its own. */
  let prefix = '';
  beforeEach(() => {
    prefix = `p${Date.now()}${Math.random().toString(36).slice(2, 6)}:`;
  });

  /** A replica whose poll runs only when the test advances the clock; `polls: false` never polls. */
  async function replica(
    keyStore: MemoryKeyStore,
    options: {
      polls?: boolean;
      redisUrl?: string;
      env?: Record<string, string>;
      logs?: Record<string, unknown>[];
    } = {},
  ): Promise<TestGateway> {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const gw = await startGateway({
      redisUrl: options.redisUrl ?? redis.url,
      upstream: upstream.url,
      prefix,
      keyStore,
      pubsub: false,
      env: { REVOCATION_POLL_MS: options.polls === false ? POLL_MAX : String(POLL_MS), ...options.env },
      ...(options.logs ? { logs: options.logs } : {}),
    });
    open.push(gw);
    return gw;
  }

  /** Advances the clock to the next poll, which asks the store at once, and waits until it has its answer. */
  async function poll(keyStore: ControlledKeyStore): Promise<void> {
    const before = keyStore.calls;
    const answered = once(keyStore.polls, 'poll');
    vi.advanceTimersByTime(POLL_MS);
    expect(keyStore.calls, 'a poll came due').toBe(before + 1);
    await answered;
    await settled();
  }

  async function code(gw: TestGateway, key: string): Promise<string | number> {
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    return res.statusCode === 200 ? 200 : (res.json() as { code: string }).code;
  }

  function revoke(gw: TestGateway, id: string) {
    return gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${id}`, headers: bearer(ADMIN_TOKEN) });
  }

  it('apply a change made before their first poll at that first poll', async () => {
    const keyStore = new ControlledKeyStore();
    const a = await replica(keyStore, { polls: false });
    const b = await replica(keyStore);
    const { id, key } = await addKey(a.deps, 'pro');
    expect(await code(b, key)).toBe(200);
    expect((await revoke(a, id)).statusCode).toBe(204);
    expect(await code(b, key)).toBe(200);
    await poll(keyStore);
    expect(await code(b, key)).toBe('invalid_api_key');
  });

  it('ask a slow key store for changes one poll at a time', async () => {
    const keyStore = new ControlledKeyStore();
    await replica(keyStore);
    const release = keyStore.hold();
    vi.advanceTimersByTime(POLL_MS);
    expect(keyStore.calls).toBe(1);
    // Three more polls come due while the first waits for its answer: none of them asks.
    vi.advanceTimersByTime(3 * POLL_MS);
    expect(keyStore.calls).toBe(1);
    const answered = once(keyStore.polls, 'poll');
    release();
    await answered;
    await settled();
    vi.advanceTimersByTime(POLL_MS);
    expect(keyStore.calls).toBe(2);
  });

  it('keep polling after the key store fails a poll, with a warning, and apply the change once it answers', async () => {
    const keyStore = new ControlledKeyStore();
    const logs: Record<string, unknown>[] = [];
    const a = await replica(keyStore, { polls: false });
    const b = await replica(keyStore, { logs });
    const { id, key } = await addKey(a.deps, 'pro');
    expect(await code(b, key)).toBe(200);
    expect((await revoke(a, id)).statusCode).toBe(204);
    keyStore.failing = true;
    await poll(keyStore);
    const warnings = logs.filter((l) => String(l.msg).startsWith('key change poll failed'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, err: { message: 'key store unreachable' } });
    expect(await code(b, key)).toBe(200);

    keyStore.failing = false;
    await poll(keyStore);
    expect(await code(b, key)).toBe('invalid_api_key');
  });

  it('keep polling after a ban recheck fails with Redis down, with a warning, and free the key once the lift is seen', async () => {
    const own = await RedisProcess.start();
    try {
      const keyStore = new ControlledKeyStore();
      const logs: Record<string, unknown>[] = [];
      const env = { BAN_THRESHOLD: '1', BAN_SECONDS: '900', BAN_GRACE_MS: '0' };
      const a = await replica(keyStore, { polls: false, redisUrl: own.url, env });
      const b = await replica(keyStore, { redisUrl: own.url, env, logs });
      const { id, key } = await addKey(a.deps, 'enterprise', { perMinute: 1, perDay: 100 });
      expect(await code(a, key)).toBe(200);
      expect(await code(a, key)).toBe('rate_limit_exceeded');
      expect(await code(a, key)).toBe('api_key_banned');
      expect(await code(b, key)).toBe('api_key_banned');

      await own.kill();
      await poll(keyStore);
      // The recheck's Redis call fails once the connection's loss is noticed.
      const warnings = () => logs.filter((l) => String(l.msg).startsWith('ban recheck failed'));
      await vi.waitFor(() => expect(warnings()).toHaveLength(1), { timeout: 5_000, interval: 20 });
      expect(warnings()[0]).toMatchObject({ level: 40, err: { message: expect.any(String) } });

      await own.restart();
      for (const gw of [a, b]) await vi.waitFor(() => expect(redisReady(gw)).toBe(true), { timeout: 10_000 });
      const lift = await a.admin.inject({
        method: 'DELETE',
        url: `/admin/keys/${id}/ban`,
        headers: bearer(ADMIN_TOKEN),
      });
      expect(lift.statusCode).toBe(204);
      // B still answers from its memory of the ban until its next poll asks Redis.
      expect(await code(b, key)).toBe('api_key_banned');
      // That poll asks Redis about the ban it remembers, and finds none.
      await poll(keyStore);
      await vi.waitFor(async () => expect(await code(b, key)).not.toBe('api_key_banned'), {
        timeout: 5_000,
        interval: 20,
      });
    } finally {
      await own.stop();
    }
  });

  it('stop polling the key store once closed', async () => {
    const keyStore = new ControlledKeyStore();
    const gw = await replica(keyStore);
    await poll(keyStore);
    expect(keyStore.calls).toBe(1);
    await gw.close();
    open.splice(open.indexOf(gw), 1);
    vi.advanceTimersByTime(3 * POLL_MS);
    expect(keyStore.calls).toBe(1);
  });
});

describe('a key change while Redis is down', () => {
  it('is answered and applied on this replica, with a warning that the others learn of it by polling', async () => {
    const own = await RedisProcess.start();
    try {
      const logs: Record<string, unknown>[] = [];
      const gw = await startGateway({ redisUrl: own.url, upstream: upstream.url, logs });
      open.push(gw);
      const { id, key } = await addKey(gw.deps, 'free');
      expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(key) })).headers['x-ratelimit-limit']).toBe('60');
      await own.kill();
      const change = await gw.admin.inject({
        method: 'PATCH',
        url: `/admin/keys/${id}`,
        headers: bearer(ADMIN_TOKEN),
        payload: { plan: 'pro' },
      });
      expect(change.statusCode).toBe(200);
      const warnings = logs.filter((l) => String(l.msg).startsWith('key change not published'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ level: 40, keyId: id });
      // Served by the per-replica fallback, under the new plan.
      const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBe('300');
    } finally {
      await own.stop();
    }
  });
});
