import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '@animal-store/gateway/config.js';
import { RedisCreditLedger } from '@animal-store/gateway/credits/redis-credit-ledger.js';
import { MemoryCustomerStore } from '@animal-store/gateway/customers/memory-customer-store.js';
import { generateApiKey, hashApiKey } from '@animal-store/gateway/keys/api-key.js';
import { createKey } from '@animal-store/gateway/keys/create-key.js';
import { MemoryKeyStore } from '@animal-store/gateway/keys/memory-key-store.js';
import { RedisKeyLimiter } from '@animal-store/gateway/limits/engines/redis-key-limiter.js';
import { createRedisClients, type RedisClient, whenReady } from '@animal-store/gateway/redis/clients.js';
import { creditsContract } from '@animal-store/gateway/test/limits/credits.contract.js';
import {
  ADMIN_TOKEN,
  addKey,
  bearer,
  connected,
  redisClient,
  startEchoUpstream,
  startGateway,
  type TestGateway,
} from '@animal-store/gateway/test/support/helpers.js';
import { testClock } from '@animal-store/gateway/test/support/test-clock.js';
import { startReceiver } from '@animal-store/gateway/test/support/webhook-receiver.js';
import type { Cluster } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { RedisInspector } from '../support/redis-inspect.js';
import type { RedisTopology } from '../support/redis-topology.js';
import { type Outcome, startLoops, tally } from '../support/request-loop.js';
import { killAllServices, metricValue, ServiceProcess } from '../support/service-process.js';

/**
 * The gateway's guarantees on a Redis Sentinel or Redis Cluster built from redis-server: exact
 * shared limits across replicas, shared bans and events, and what a master's crash costs in open
 * and closed mode. The failover figures are measured and printed, never asserted beyond the
 * issue's bounds (no request over 1 s, shared again within 5 s of the promotion).
 */

/** No request may take longer than this while a replica is promoted. */
const BOUND_MS = 1_000;
/** Shared limiting must be back this soon after the new master is reachable. */
const RECOVERY_MS = 5_000;

interface FileKey {
  id: string;
  key: string;
  plan: string;
  limits?: { perMinute: number; perDay: number };
}

/** Limits no test reaches: every request is admitted, so each admission is visible in the counters. */
const UNLIMITED = { perMinute: 1_000_000, perDay: 10_000_000 };

function fileKey(id: string, plan = 'enterprise', limits: FileKey['limits'] | null = UNLIMITED): FileKey {
  return { id, key: generateApiKey(), plan, ...(limits ? { limits } : {}) };
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
}

export function topologyContract(label: string, start: () => Promise<RedisTopology>): void {
  describe(`gateway on ${label}`, () => {
    let topology: RedisTopology;
    let upstream: Awaited<ReturnType<typeof startEchoUpstream>>;
    let dir: string;
    let reader: RedisClient;
    const gateways: TestGateway[] = [];
    const inspectors: RedisInspector[] = [];
    const running: Array<ReturnType<typeof startLoops>> = [];

    beforeAll(async () => {
      [topology, upstream, dir] = await Promise.all([
        start(),
        startEchoUpstream(),
        mkdtemp(join(tmpdir(), 'topology-')),
      ]);
      // A client made as the gateway makes it, from the same environment, for reading counters.
      const target = loadConfig(topology.env).redis;
      if (!target) throw new Error('topology env names no Redis');
      reader = createRedisClients(target, 2_000, { subscriber: false }).redis;
      await whenReady(reader);
    });
    afterEach(async () => {
      for (const inspector of inspectors.splice(0)) inspector.close();
      await Promise.all(running.splice(0).map((l) => l.stop()));
      await Promise.all(gateways.splice(0).map((g) => g.close()));
      await killAllServices();
    });
    afterAll(async () => {
      reader?.disconnect();
      await topology?.stop();
      await upstream?.close();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    /** Two in-process replicas of one deployment: one prefix, one key and customer store (standing in for MongoDB). */
    async function replicas(env: Record<string, string> = {}, now?: () => number) {
      const keyStore = new MemoryKeyStore();
      const customerStore = new MemoryCustomerStore();
      const prefix = `t${randomUUID().slice(0, 8)}:`;
      const make = async () => {
        const gw = await startGateway({
          upstream: upstream.url,
          prefix,
          keyStore,
          customerStore,
          env: { ...topology.env, ...env },
          ...(now ? { now } : {}),
        });
        gateways.push(gw);
        await gw.listen();
        return gw;
      };
      return { a: await make(), b: await make(), prefix };
    }

    async function get(gw: TestGateway, key: string) {
      const res = await fetch(`${gw.url}/v1/pets`, { headers: bearer(key) });
      const body = (await res.json()) as { code?: string };
      return { status: res.status, code: body.code };
    }

    it('two replicas admit exactly 60 of 150 concurrent requests on one free key, in a fraction of a script call per request on the master of its slot', async () => {
      const { a, b } = await replicas({ BAN_THRESHOLD: '1000' });
      const { id, key } = await addKey(a.deps, 'free');
      const master = await RedisInspector.connect((await topology.masterFor(id)).port);
      inspectors.push(master);
      const calls = () => master.commandCalls('evalsha');
      const before = await calls();

      const results = await Promise.all(Array.from({ length: 150 }, (_, i) => get(i % 2 ? a : b, key)));

      expect(results.filter((r) => r.status === 200)).toHaveLength(60);
      expect(results.filter((r) => r.status === 429 && r.code === 'rate_limit_exceeded')).toHaveLength(90);
      // All four keys of the script share the key's hash tag, so every call ran on this one master.
      const scriptCalls = (await calls()) - before;
      expect(scriptCalls).toBeGreaterThan(0);
      expect(scriptCalls).toBeLessThan(150);
    });

    // India's hours are kept from :30 past the UTC hour, in the day hash of the UTC day they start in: still the customer's slot.
    it.each(['Europe/Paris', 'Asia/Kolkata'])(
      'two replicas admit exactly a customer’s 60 a minute from 3 of its keys × 50 concurrent requests, on the master of the customer’s slot (%s)',
      async (timeZone) => {
        const { a, b } = await replicas({ BAN_THRESHOLD: '1000' });
        const customerId = `cus_${randomUUID().slice(0, 16)}`;
        const billing = { anchorDay: 15, timeZone };
        await a.deps.customerStore.insert({
          id: customerId,
          name: 'Acme',
          plan: 'free',
          billing,
          createdAt: new Date().toISOString(),
        });
        const keys: string[] = [];
        for (let i = 0; i < 3; i++) {
          const { key, record } = createKey({ plan: 'free', name: `k${i}` });
          await a.deps.keyStore.insert({ ...record, customerId });
          keys.push(key);
        }
        const master = await RedisInspector.connect((await topology.masterFor(customerId)).port);
        inspectors.push(master);
        const before = await master.commandCalls('evalsha');

        const results = await Promise.all(
          keys.flatMap((key) => Array.from({ length: 50 }, (_, i) => get(i % 2 ? a : b, key))),
        );

        expect(results.filter((r) => r.status === 200)).toHaveLength(60);
        expect(results.filter((r) => r.status === 429 && r.code === 'rate_limit_exceeded')).toHaveLength(90);
        // Every key the script touches for a key of a customer carries the customer's hash tag: one slot, no CROSSSLOT.
        expect((await master.commandCalls('evalsha')) - before).toBeGreaterThan(0);
        const hours = await a.deps.history.hours(customerId, Date.now() - 3 * 3_600_000, Date.now() + 3_600_000);
        const sum = (name: 'admitted' | 'limited') => hours.reduce((n, h) => n + h[name], 0);
        expect([sum('admitted'), sum('limited')]).toEqual([60, 90]);
      },
    );

    it('two replicas spend a customer’s 100 credits exactly: 3 keys × 100 concurrent requests, in the customer’s slot', async () => {
      // Closed: in open mode any failed limiter call puts a replica on its own windows for 500 ms,
      // which spend no credits (docs/credits.md), and a failure showed only as too many admitted
      // (129 to 252). Closed, it is a 503 named in the tally, which is how the Cluster pipeline bug
      // in redis/clients.ts (leaveOutOfAutoPipelines) was found: 100, then 199 503s.
      const { a, b } = await replicas({ BAN_THRESHOLD: '1000', RATE_LIMIT_FAILURE_MODE: 'closed' });
      const customerId = `cus_${randomUUID().slice(0, 16)}`;
      await a.deps.customerStore.insert({
        id: customerId,
        name: 'Acme',
        plan: 'pro',
        billing: { anchorDay: 15, timeZone: 'Europe/Paris' },
        credits: {},
        createdAt: new Date().toISOString(),
      });
      const topUp = await a.admin.inject({
        method: 'POST',
        url: `/admin/customers/${customerId}/credits`,
        headers: bearer(ADMIN_TOKEN),
        payload: { amount: 100, reason: 'order 1' },
      });
      expect(topUp.statusCode, topUp.body).toBe(201);
      const keys: string[] = [];
      for (let i = 0; i < 3; i++) {
        const { key, record } = createKey({ plan: 'pro', name: `k${i}` });
        await a.deps.keyStore.insert({ ...record, customerId });
        keys.push(key);
      }
      const results = await Promise.all(
        keys.flatMap((key) => Array.from({ length: 100 }, (_, i) => get(i % 2 ? a : b, key))),
      );
      const counts: Record<string, number> = {};
      for (const r of results) counts[`${r.status} ${r.code ?? ''}`] = (counts[`${r.status} ${r.code ?? ''}`] ?? 0) + 1;
      const tally = JSON.stringify(counts);
      expect(
        results.filter((r) => r.status === 200),
        tally,
      ).toHaveLength(100);
      expect(
        results.filter((r) => r.status === 402 && r.code === 'credits_exhausted'),
        tally,
      ).toHaveLength(200);
      const ledger = await b.admin.inject({
        url: `/admin/customers/${customerId}/credits/ledger`,
        headers: bearer(ADMIN_TOKEN),
      });
      const page = ledger.json() as { balance: number; openHour: { spent: number }; items: { amount: number }[] };
      expect(page.balance).toBe(0);
      expect(page.items.reduce((t, e) => t + e.amount, 0) - page.openHour.spent).toBe(0);
    });

    it('sends a script whose first argument is its number of keys to its keys’ node, beside a write to another node in the same turn', async (ctx) => {
      if (!reader.isCluster) return ctx.skip();
      const cluster = reader as Cluster;
      const nodeOf = async (key: string) => cluster.slots[Number(await cluster.call('CLUSTER', 'KEYSLOT', key))]?.[0];
      // ioredis groups an auto-pipeline by a command's first key, and took a script's first
      // argument ("1" here) for one: the script shared a pipeline with a write to "1"'s node.
      const numbersNode = await nodeOf('1');
      const key = async (wanted: (node: string | undefined) => boolean) => {
        for (let i = 0; ; i++) if (wanted(await nodeOf(`pipe${i}`))) return `pipe${i}`;
      };
      const elsewhere = await key((node) => node !== numbersNode);
      const there = await key((node) => node === numbersNode);
      const target = loadConfig(topology.env).redis;
      if (!target) throw new Error('topology env names no Redis');
      const client = createRedisClients(target, 2_000, { subscriber: false }).redis as Cluster;
      try {
        await whenReady(client);
        // Defined without a fixed number of keys, as the gateway’s limiter defines its scripts.
        client.defineCommand('gatewayUsage', { lua: "return redis.call('SET', KEYS[1], ARGV[1])" });
        const run = client as unknown as { gatewayUsage(n: number, key: string, value: string): Promise<string> };
        expect(await Promise.all([run.gatewayUsage(1, elsewhere, 'a'), client.set(there, 'b')])).toEqual(['OK', 'OK']);
      } finally {
        client.disconnect();
      }
    });

    // The credits contract's limiter-level cases (mixed costs in order, a daily refill on a test
    // clock, the ledger's sum by the hour, refunds of unserved requests, the exhausted mark) on
    // this topology's client, as a gateway makes it: before the failover cases, on the first masters.
    creditsContract(label, async (ban) => {
      const prefix = `t${randomUUID().slice(0, 8)}:`;
      const clock = testClock({ client: reader, prefix });
      return {
        limiter: new RedisKeyLimiter(reader, prefix, ban, clock.now),
        credits: new RedisCreditLedger(reader, prefix),
        ...clock,
        // The reader is the suite's: it outlives each case.
        cleanup: async () => {},
      };
    });

    it('share a ban, and an admin unban and a revocation reach the other replica through pub/sub', async () => {
      // The store poll is slower than the test: only pub/sub can tell replica b in time.
      const { a, b } = await replicas({
        BAN_THRESHOLD: '2',
        BAN_GRACE_MS: '0',
        BAN_SECONDS: '900',
        REVOCATION_POLL_MS: '60000',
      });
      const { id, key } = await addKey(a.deps, 'enterprise', { perMinute: 1, perDay: 100 });
      expect((await get(a, key)).status).toBe(200);
      for (let i = 0; i < 2; i++) expect((await get(a, key)).code).toBe('rate_limit_exceeded');
      expect((await get(a, key)).code).toBe('api_key_banned');
      expect((await get(b, key)).code).toBe('api_key_banned');
      // Either replica counts it among the bans in force: the index is one key of its own slot.
      const bans = async () =>
        (await b.admin.inject({ method: 'GET', url: '/admin/bans', headers: bearer(ADMIN_TOKEN) })).json();
      expect(await bans()).toMatchObject({ count: 1, items: [{ id }] });

      const lift = await a.admin.inject({
        method: 'DELETE',
        url: `/admin/keys/${id}/ban`,
        headers: bearer(ADMIN_TOKEN),
      });
      expect(lift.statusCode).toBe(204);
      await vi.waitFor(async () => expect((await get(b, key)).code).toBe('rate_limit_exceeded'), { timeout: 5_000 });
      expect(await bans()).toEqual({ count: 0, items: [] });

      const revoke = await a.admin.inject({ method: 'DELETE', url: `/admin/keys/${id}`, headers: bearer(ADMIN_TOKEN) });
      expect(revoke.statusCode).toBe(204);
      await vi.waitFor(async () => expect((await get(b, key)).code).toBe('invalid_api_key'), { timeout: 5_000 });
    });

    // BullMQ's scripts touch several keys at once: on a Cluster they run only because every key of
    // the queue carries the one hash tag (`{<prefix>webhooks}`), else CROSSSLOT fails each add.
    it('webhooks: two replicas crossing 80 % together send one signed key.quota.warning through BullMQ, retried after a 503', async () => {
      const { a, b } = await replicas({
        WEBHOOKS_ALLOW_INSECURE: 'true',
        WEBHOOKS_ALLOW_PRIVATE: 'true',
        WEBHOOKS_RETRY_BASE_MS: '20',
        WEBHOOKS_RETRY_MAX_DELAY_MS: '100',
      });
      // The first answer is 503: the retry comes through the queue's delayed set on this topology too.
      const hook = await startReceiver([503]);
      try {
        const created = await a.admin.inject({
          method: 'POST',
          url: '/admin/webhooks',
          headers: bearer(ADMIN_TOKEN),
          payload: { url: hook.url, events: ['key.quota.warning'] },
        });
        expect(created.statusCode, created.body).toBe(201);
        const { id: hookId, secret } = created.json() as { id: string; secret: string };
        const { id, key } = await addKey(a.deps, 'enterprise', { perMinute: 100, perDay: 10 });
        // 8 of 10 (80 %) at once, half through each replica.
        const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => get(i % 2 ? a : b, key)));
        expect(answers.map((r) => r.status)).toEqual(Array(8).fill(200));
        await hook.until(2);
        await vi.waitFor(async () => expect((await b.deps.webhooks.queue.stats()).depth).toBe(0), {
          timeout: 10_000,
          interval: 20,
        });
        const delivered = hook.received.filter((r) => r.status === 200);
        expect(delivered).toHaveLength(1);
        const event = new Webhook(secret).verify(
          delivered[0]?.body as string,
          delivered[0]?.headers as Record<string, string>,
        );
        expect(event).toMatchObject({ type: 'key.quota.warning', data: { keyId: id, used: 8, limit: 10 } });
        // Either replica reads the attempts: the 503, then the delivery.
        const attempts = await b.admin.inject({
          url: `/admin/webhooks/${hookId}/deliveries`,
          headers: bearer(ADMIN_TOKEN),
        });
        expect(
          (attempts.json() as Array<{ statusCode: number; outcome: string }>).map((x) => [x.statusCode, x.outcome]),
        ).toEqual([
          [200, 'delivered'],
          [503, 'retrying'],
        ]);
      } finally {
        await hook.close();
      }
    });

    // The closer reads each subject's day hashes (its own slot) and appends to the stream and the
    // hour's last-revision hash (the `{metering}` slot): separate commands, no CROSSSLOT.
    it('metering: two replicas report a Kolkata customer’s and a lone key’s closed hour once, with exact units by route, read back from either', async () => {
      let at = Date.now();
      const now = () => at;
      const plans = join(dir, `plans-${randomUUID().slice(0, 8)}.json`);
      await writeFile(
        plans,
        JSON.stringify({ plans: { metered: { windows: { minute: 1000 } } }, routeCosts: { 'POST /v1/pets': 5 } }),
      );
      const { a, b } = await replicas({ PLANS_FILE: plans, BAN_THRESHOLD: '1000' }, now);
      const call = (gw: TestGateway, url: string, payload: object) =>
        gw.admin.inject({ method: 'POST', url, headers: bearer(ADMIN_TOKEN), payload });
      const customer = (
        await call(a, '/admin/customers', {
          name: 'Mumbai',
          plan: 'metered',
          billing: { anchorDay: 1, timeZone: 'Asia/Kolkata' },
        })
      ).json() as { id: string };
      const key = (await call(a, '/admin/keys', { customerId: customer.id })).json() as { key: string };
      const lone = (await call(a, '/admin/keys', { plan: 'metered' })).json() as { id: string; key: string };
      const send = (gw: TestGateway, k: string, method: 'GET' | 'POST') =>
        gw.app.inject({
          method,
          url: '/v1/pets',
          headers: { ...bearer(k), 'content-type': 'application/json' },
          ...(method === 'POST' ? { payload: { name: 'Rex', categoryId: 1 } } : {}),
        });
      const answers = await Promise.all([
        ...Array.from({ length: 6 }, (_, i) => send(i % 2 ? a : b, key.key, 'GET')),
        ...Array.from({ length: 4 }, (_, i) => send(i % 2 ? a : b, key.key, 'POST')),
        ...Array.from({ length: 3 }, (_, i) => send(i % 2 ? a : b, lone.key, 'GET')),
      ]);
      expect(answers.map((r) => r.statusCode)).toEqual(Array(13).fill(200));
      // India is UTC+5:30: its hours run from :30 past the UTC hour; a lone key's are UTC hours.
      const localHour = Math.floor((at - 1_800_000) / 3_600_000) * 3_600_000 + 1_800_000;
      const utcHour = Math.floor(at / 3_600_000) * 3_600_000;
      at = Math.max(localHour, utcHour) + 3_600_000 + 300_000;
      await Promise.all([a.deps.history.flush(), b.deps.history.flush()]);
      const appended = (await Promise.all([a, b].map((gw) => gw.deps.meteringCloser.closeDue()))).flat();
      expect(appended.map((r) => r.subject).sort()).toEqual([customer.id, lone.id].sort());

      for (const gw of [a, b]) {
        const res = await gw.admin.inject({ url: '/admin/metering/events?limit=1000', headers: bearer(ADMIN_TOKEN) });
        expect(res.statusCode, res.body).toBe(200);
        const events = (res.json() as { events: Array<{ subject: string; time: string; data: object }> }).events;
        const bySubject = Object.fromEntries(events.map((e) => [e.subject, e]));
        expect(events).toHaveLength(2);
        expect(bySubject[customer.id]).toMatchObject({
          time: new Date(localHour).toISOString(),
          data: { units: 26, delta: 26, revision: 1, routes: { 'GET /v1/pets': 6, 'POST /v1/pets': 20 } },
        });
        expect(bySubject[lone.id]).toMatchObject({
          time: new Date(utcHour).toISOString(),
          data: { units: 3, delta: 3, revision: 1, routes: { 'GET /v1/pets': 3 } },
        });
      }
      // Another pass on both replicas appends nothing.
      expect((await Promise.all([a, b].map((gw) => gw.deps.meteringCloser.closeDue()))).flat()).toEqual([]);
    });

    /** Gateway processes (server.ts, configured from the environment alone) on this topology. */
    async function processes(n: number, mode: 'open' | 'closed', keys: FileKey[]): Promise<ServiceProcess[]> {
      const keysFile = join(dir, `keys-${randomUUID().slice(0, 8)}.json`);
      await writeFile(
        keysFile,
        JSON.stringify(
          keys.map((k) => ({ id: k.id, name: k.id, plan: k.plan, limits: k.limits, sha256: hashApiKey(k.key) })),
        ),
      );
      const started = await Promise.all(
        Array.from({ length: n }, () =>
          ServiceProcess.start('gateway', {
            ...topology.env,
            PETS_URL: upstream.url,
            API_KEYS_FILE: keysFile,
            RATE_LIMIT_FAILURE_MODE: mode,
          }),
        ),
      );
      for (const gw of started) {
        expect(gw.messages(`redis=${topology.mode}`)).toHaveLength(1);
        await vi.waitFor(
          async () => {
            expect((await fetch(`${gw.url}/v1/pets`, { headers: bearer(keys[0]?.key ?? '') })).status).toBe(200);
            expect(await decisions(gw, 'shared')).toBeGreaterThan(0);
          },
          {
            timeout: 10_000,
            interval: 100,
          },
        );
      }
      return started;
    }

    async function decisions(gw: ServiceProcess, source: string, decision = 'admitted'): Promise<number> {
      const res = await fetch(`${gw.metricsUrl}/metrics`, { signal: AbortSignal.timeout(BOUND_MS) });
      return metricValue(await res.text(), 'gateway_rate_limit_decisions_total', { source, decision });
    }

    /** Whether the process's key-event subscription delivers (its own probe comes back). */
    async function subscribed(gw: ServiceProcess): Promise<number> {
      const res = await fetch(`${gw.metricsUrl}/metrics`, { signal: AbortSignal.timeout(BOUND_MS) });
      return metricValue(await res.text(), 'gateway_event_bus_subscribed');
    }

    async function total(gws: ServiceProcess[], source: string): Promise<number> {
      return (await Promise.all(gws.map((g) => decisions(g, source)))).reduce((a, b) => a + b, 0);
    }

    /** A key id whose slot `accept` likes (on Sentinel every key has the one master). */
    async function keyIdWhere(accept: (masterPort: number) => boolean): Promise<string> {
      for (let i = 0; i < 200; i++) {
        const id = `fo_${randomUUID().slice(0, 8)}`;
        if (accept((await topology.masterFor(id)).port)) return id;
      }
      throw new Error('no key id hashes to a wanted master');
    }

    function load(gws: ServiceProcess[], key: string, concurrency: number) {
      const loops = startLoops({
        concurrency,
        timeoutMs: 10_000,
        request: (loop) => ({ url: `${gws[loop % gws.length]?.url}/v1/pets`, headers: bearer(key) }),
      });
      running.push(loops);
      return loops;
    }

    function latencies(outcomes: Outcome[]) {
      const ms = outcomes.map((o) => o.end - o.start);
      return { requests: ms.length, p99Ms: percentile(ms, 99), maxMs: Math.max(0, ...ms) };
    }

    function expectAnsweredWithin(outcomes: Outcome[]): void {
      expect(
        outcomes.filter((o) => o.error !== undefined),
        JSON.stringify(tally(outcomes)),
      ).toEqual([]);
      expect(latencies(outcomes).maxMs, `slowest of ${outcomes.length}`).toBeLessThanOrEqual(BOUND_MS);
    }

    /**
     * The test's own reader may still hold the dead master as the slot's owner, or be
     * reconnecting through the sentinels ("Connection is closed."): it tries again until it reads.
     */
    function readAfterFailover(read: () => Promise<string | null>): Promise<string | null> {
      return vi.waitFor(read, { timeout: 5_000, interval: 50 });
    }

    /** A key's count in today's day window: the field `d` of its usage-history hash of the day. */
    function dayCount(keyId: string): Promise<string | null> {
      return readAfterFailover(() => reader.hget(`gw:{${keyId}}:h:${Math.floor(Date.now() / 86_400_000)}`, 'd'));
    }

    /** A master killed by an earlier failover test, and its replica that took over (now without one). */
    const spent = new Set<number>();

    it(`open mode: a master's crash costs no 5xx and no request over ${BOUND_MS} ms; the fallback serves; shared and exact again within 5 s of the promotion`, async () => {
      // Not the `{metering}` slot's master on a Cluster: the closed-mode test fails that one over.
      const meteringMaster = (await topology.masterFor('{metering}')).port;
      const measured = fileKey(await keyIdWhere((p) => topology.mode === 'sentinel' || p !== meteringMaster));
      const masterPort = (await topology.masterFor(measured.id)).port;
      // A free key on the same master, for the exactness check once it has failed over.
      const check = fileKey(await keyIdWhere((p) => p === masterPort), 'free', null);
      const gws = await processes(2, 'open', [measured, check]);
      // Two in-process replicas too, connected before the crash, to show pub/sub follows it.
      const pair = await replicas({ REVOCATION_POLL_MS: '60000' });
      for (const gw of gws) await vi.waitFor(async () => expect(await subscribed(gw)).toBe(1), { timeout: 10_000 });
      const loops = load(gws, measured.key, 8);
      await vi.waitFor(() => expect(loops.outcomes.length).toBeGreaterThanOrEqual(200), { timeout: 10_000 });

      const failover = await topology.killMasterFor(measured.id);
      for (const port of [failover.master, ...failover.replicas]) spent.add(port);
      // Each replica fell back; from here its shared count stands still until Redis is back.
      const sharedInGap: number[] = [];
      for (const gw of gws) {
        await vi.waitFor(async () => expect(await decisions(gw, 'fallback')).toBeGreaterThan(0), {
          timeout: 5_000,
          interval: 25,
        });
        sharedInGap.push(await decisions(gw, 'shared'));
      }
      const promotedAt = await failover.promoted;
      await vi.waitFor(
        async () => {
          for (const [i, gw] of gws.entries())
            expect(await decisions(gw, 'shared')).toBeGreaterThan(sharedInGap[i] ?? 0);
        },
        { timeout: RECOVERY_MS + 2_000, interval: 25 },
      );
      const recoveredAt = Date.now();
      // Keep the load on a little past the recovery, then stop it.
      await new Promise((r) => setTimeout(r, 500));
      const outcomes = await loops.stop();

      // Every request of the run answered 200 (the key's limits are out of reach), none slow.
      expect(tally(outcomes)).toEqual({ '200': outcomes.length });
      expectAnsweredWithin(outcomes);
      expect(recoveredAt - promotedAt).toBeLessThanOrEqual(RECOVERY_MS);
      for (const gw of gws) expect(gw.alive).toBe(true);

      // Writes the promoted replica never received: admissions the gateways counted as shared that
      // its day counter lacks. Each one is a request that can be admitted again beyond the limit.
      const shared = await total(gws, 'shared');
      const counted = Number(await dayCount(measured.id));
      const figures = {
        topology: label,
        mode: 'open',
        promotionSeconds: (promotedAt - failover.killedAt) / 1000,
        fallbackSeconds: (recoveredAt - failover.killedAt) / 1000,
        sharedAgainAfterPromotionSeconds: (recoveredAt - promotedAt) / 1000,
        fallbackAdmissions: await total(gws, 'fallback'),
        lostWrites: shared - counted,
        duringFailover: latencies(outcomes.filter((o) => o.start >= failover.killedAt && o.start <= recoveredAt)),
        wholeRun: latencies(outcomes),
      };
      console.log(`[failover] ${JSON.stringify(figures)}`);

      // Exact again with no restart: two replicas, 150 concurrent requests, 60 admitted (their
      // fallbacks would admit 60 each), all counted on the promoted master.
      const burst = await Promise.all(
        Array.from({ length: 150 }, (_, i) =>
          fetch(`${gws[i % 2]?.url}/v1/pets`, { headers: bearer(check.key) }).then((r) => r.status),
        ),
      );
      expect(burst.filter((s) => s === 200)).toHaveLength(60);
      expect(burst.filter((s) => s === 429)).toHaveLength(90);
      expect(Number(await dayCount(check.id))).toBe(60);

      // Each process is subscribed again (on a Cluster, perhaps through another node), by its own
      // probe's word: the probe runs every 5 s.
      for (const gw of gws) await vi.waitFor(async () => expect(await subscribed(gw)).toBe(1), { timeout: 12_000 });

      // Events flow again without a restart: a key revoked on one replica is refused by the other
      // (its store poll is a minute away). A revocation published before both connections had
      // found the new topology may be lost, so each try uses a fresh key.
      await vi.waitFor(
        async () => {
          const { id, key } = await addKey(pair.a.deps, 'pro');
          expect((await get(pair.b, key)).status).toBe(200);
          const revoke = await pair.a.admin.inject({
            method: 'DELETE',
            url: `/admin/keys/${id}`,
            headers: bearer(ADMIN_TOKEN),
          });
          expect(revoke.statusCode).toBe(204);
          await vi.waitFor(async () => expect((await get(pair.b, key)).code).toBe('invalid_api_key'), {
            timeout: 1_000,
            interval: 50,
          });
        },
        { timeout: 10_000, interval: 100 },
      );
    });

    /**
     * Run where the crash takes the `{metering}` slot's master (Sentinel's one master, or on a
     * Cluster the one the open-mode test spares). Two in-process replicas report a
     * lone key's hour before the crash, made sure to be on every replica (WAIT); `after` shows,
     * once promoted, the report read back as it was, not appended again, and a new hour reported
     * with exact units.
     */
    async function meteringBeforeCrash() {
      let at = Date.now();
      const pair = await replicas({ BAN_THRESHOLD: '1000' }, () => at);
      const created = await pair.a.admin.inject({
        method: 'POST',
        url: '/admin/keys',
        headers: bearer(ADMIN_TOKEN),
        payload: { plan: 'pro' },
      });
      const lone = created.json() as { id: string; key: string };
      const send = async (n: number) => {
        const answers = await Promise.all(
          Array.from({ length: n }, (_, i) =>
            (i % 2 ? pair.a : pair.b).app.inject({ url: '/v1/pets', headers: bearer(lone.key) }),
          ),
        );
        expect(answers.map((r) => r.statusCode)).toEqual(Array(n).fill(200));
      };
      const close = async () => {
        await Promise.all([pair.a.deps.history.flush(), pair.b.deps.history.flush()]);
        return (await Promise.all([pair.a, pair.b].map((gw) => gw.deps.meteringCloser.closeDue()))).flat();
      };
      const hour = Math.floor(at / 3_600_000) * 3_600_000;
      await send(4);
      at = hour + 3_600_000 + 300_000;
      expect((await close()).map((r) => [r.subject, r.revision, r.units])).toEqual([[lone.id, 1, 4]]);
      // On the slot's master, WAIT counts the writes before one of this client's own (one replication stream).
      const master = redisClient(`redis://127.0.0.1:${(await topology.masterFor('{metering}')).port}`);
      try {
        await connected(master);
        await master.set(`${pair.prefix}{metering}:barrier`, '1');
        // A replica may still be resyncing after an earlier test's failover: wait for one to be there.
        let replicated = 0;
        await vi.waitFor(
          async () => {
            replicated = Number(/connected_slaves:(\d+)/.exec(await master.info('replication'))?.[1]);
            expect(replicated).toBeGreaterThan(0);
          },
          { timeout: 15_000, interval: 100 },
        );
        expect(await master.wait(replicated, 5_000)).toBe(replicated);
      } finally {
        master.disconnect();
      }
      const read = async (gw: TestGateway) => {
        const res = await gw.admin.inject({ url: '/admin/metering/events?limit=1000', headers: bearer(ADMIN_TOKEN) });
        expect(res.statusCode, res.body).toBe(200);
        const events = (
          res.json() as { events: Array<{ subject: string; time: string; data: { revision: number; units: number } }> }
        ).events;
        return events.map((e) => [e.subject, e.time, e.data.revision, e.data.units]);
      };
      return {
        async after() {
          // Both replicas' connections have found the promoted master once they read.
          for (const gw of [pair.a, pair.b]) {
            await vi.waitFor(
              async () => expect(await read(gw)).toEqual([[lone.id, new Date(hour).toISOString(), 1, 4]]),
              { timeout: 10_000, interval: 100 },
            );
          }
          await send(3);
          at = hour + 2 * 3_600_000 + 300_000;
          expect((await close()).map((r) => [r.subject, r.hour, r.revision, r.units])).toEqual([
            [lone.id, hour + 3_600_000, 1, 3],
          ]);
          expect(await read(pair.b)).toEqual([
            [lone.id, new Date(hour).toISOString(), 1, 4],
            [lone.id, new Date(hour + 3_600_000).toISOString(), 1, 3],
          ]);
        },
      };
    }

    it('closed mode: a master crash answers only 503 rate_limiter_unavailable with Retry-After, and 200 again within 5 s of the promotion', async () => {
      // Cluster: a master the open-mode test left alone (one with a replica); Sentinel: the current one.
      // On a Cluster, the `{metering}` slot's master, which the open-mode test spared.
      const meteringMaster = (await topology.masterFor('{metering}')).port;
      const guarded = fileKey(
        await keyIdWhere((p) => topology.mode === 'sentinel' || (!spent.has(p) && p === meteringMaster)),
      );
      const [gw] = await processes(1, 'closed', [guarded]);
      if (!gw) throw new Error('no gateway');
      // Closed mode refuses until the gateway's Redis connection is up (readiness does not wait
      // for Redis): the load starts once it admits, so every refusal below is the failover's.
      await vi.waitFor(
        async () => {
          const res = await fetch(`${gw.url}/v1/pets`, { headers: bearer(guarded.key) });
          await res.arrayBuffer();
          expect(res.status).toBe(200);
        },
        { timeout: 10_000, interval: 50 },
      );
      const metering = await meteringBeforeCrash();
      const loops = load([gw], guarded.key, 4);
      await vi.waitFor(() => expect(loops.outcomes.length).toBeGreaterThanOrEqual(100), { timeout: 10_000 });

      const failover = await topology.killMasterFor(guarded.id);
      await vi.waitFor(() => expect(loops.since(failover.killedAt).some((o) => o.status === 503)).toBe(true), {
        timeout: 5_000,
      });
      const promotedAt = await failover.promoted;
      await vi.waitFor(() => expect(loops.since(promotedAt).some((o) => o.status === 200)).toBe(true), {
        timeout: RECOVERY_MS + 2_000,
        interval: 25,
      });
      const recoveredAt = loops.since(promotedAt).find((o) => o.status === 200)?.end ?? Date.now();
      // And it stays back: the requests after the recovery are all admitted.
      const backAt = Date.now() + 200;
      await vi.waitFor(() => expect(loops.since(backAt).length).toBeGreaterThanOrEqual(40), { timeout: 5_000 });
      const outcomes = await loops.stop();

      expectAnsweredWithin(outcomes);
      expect(Object.keys(tally(outcomes)).sort()).toEqual(['200', '503']);
      expect(outcomes.filter((o) => o.end < failover.killedAt).every((o) => o.status === 200)).toBe(true);
      expect(tally(loops.since(backAt))).toEqual({ '200': loops.since(backAt).length });
      expect(recoveredAt - promotedAt).toBeLessThanOrEqual(RECOVERY_MS);
      await metering.after();
      const refused = outcomes.filter((o) => o.status === 503);
      for (const o of refused) {
        expect(JSON.parse(o.body ?? '')).toEqual({
          code: 'rate_limiter_unavailable',
          message: expect.any(String),
          status: 503,
        });
        expect(Number(o.headers?.['retry-after'])).toBeGreaterThanOrEqual(1);
      }
      expect(gw.alive).toBe(true);
      const figures = {
        topology: label,
        mode: 'closed',
        promotionSeconds: (promotedAt - failover.killedAt) / 1000,
        refusingSeconds: (Math.max(...refused.map((o) => o.end)) - Math.min(...refused.map((o) => o.start))) / 1000,
        refused: refused.length,
        duringFailover: latencies(outcomes.filter((o) => o.start >= failover.killedAt && o.start <= recoveredAt)),
      };
      console.log(`[failover] ${JSON.stringify(figures)}`);
    });
  });
}
