import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import Fastify, { type FastifyInstance, type InjectOptions, type LightMyRequestResponse } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, expect, vi } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { buildApp } from '../../src/app.js';
import { type GatewayConfig, loadConfig } from '../../src/config.js';
import type { CustomerStore } from '../../src/customers/customer-store.js';
import { createDeps, type GatewayDeps } from '../../src/deps.js';
import { natsDialer } from '../../src/external-clients.js';
import { createKey } from '../../src/keys/create-key.js';
import type { KeyStore } from '../../src/keys/key-store.js';
import type { Limits, Plan } from '../../src/plans/plans.js';
import { buildPortalApp } from '../../src/portal/app.js';
import { createRedisClients, type RedisClient, redisOptions, whenReady } from '../../src/redis/clients.js';

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

/**
 * The admin listener of a test gateway, built on first use: most tests never call it, and
 * building it costs about as much as the rest of the gateway.
 */
export interface TestAdmin {
  inject(options: InjectOptions | string): Promise<LightMyRequestResponse>;
  listen(options: { host: string; port: number }): Promise<string>;
  /** Its server, once `listen` has been called. */
  readonly server: FastifyInstance['server'];
}

export interface TestGateway {
  app: FastifyInstance;
  admin: TestAdmin;
  /** The customers' portal listener, built on first use as the admin one is. */
  portal: TestAdmin;
  deps: GatewayDeps;
  config: GatewayConfig;
  redis: RedisClient | null;
  /** The pub/sub connection, when there is one. */
  subscriber: RedisClient | null;
  /** The limit script's own connection (redis/clients.ts): a test of Redis going away drops it too. */
  limiterRedis: RedisClient | null;
  /** Base URL once `listen()` was called. */
  url: string;
  listen(): Promise<string>;
  close(): Promise<void>;
}

export interface GatewayOptions {
  /** A standalone Redis; Sentinel and Cluster are set through `env` (REDIS_SENTINELS, REDIS_CLUSTER_NODES). */
  redisUrl?: string | null;
  upstream?: string;
  env?: Record<string, string>;
  /** Shared by gateways that act as replicas of one deployment. */
  prefix?: string;
  now?: () => number;
  /** A key store shared with other gateways, standing in for MongoDB. */
  keyStore?: KeyStore;
  /** A customer store shared with other gateways, standing in for MongoDB. */
  customerStore?: CustomerStore;
  /** Keys and customers in the gateway's Redis, as server.ts keeps them with Redis and no MongoDB. */
  keysInRedis?: boolean;
  /** Whether to connect the pub/sub subscriber (default true with Redis). */
  pubsub?: boolean;
  /** Collects the gateway's log lines (both listeners), parsed, at LOG_LEVEL info unless env says otherwise. */
  logs?: Record<string, unknown>[];
  /** How often the event bus probes its own subscription (default events.ts PROBE_MS). */
  eventProbeMs?: number;
  /** Whether to wait until the event bus is subscribed before answering (default true). */
  waitForSubscription?: boolean;
}

/** Redis client options as server.ts sets them, so tests see the production failure behaviour. */
export function redisClient(url: string, commandTimeoutMs = 250): Redis {
  const client = new Redis(url, redisOptions(commandTimeoutMs));
  client.on('error', () => {});
  return client;
}

/** Whether every Redis connection of a test gateway is back (after a restart): commands and the limit script's. */
export const redisReady = (gw: TestGateway): boolean =>
  gw.redis?.status === 'ready' && (gw.limiterRedis === null || gw.limiterRedis.status === 'ready');

/** Waits until an ioredis client is connected (its offline queue is off, so commands before that fail). */
export async function connected<C extends RedisClient>(client: C): Promise<C> {
  await whenReady(client);
  return client;
}

/** A gateway built the way server.ts builds it, on a real Redis when given one. */
export async function startGateway(options: GatewayOptions = {}): Promise<TestGateway> {
  const prefix = options.prefix ?? `t${randomUUID().slice(0, 8)}:`;
  const config = loadConfig({
    LOG_LEVEL: options.logs ? 'info' : 'silent',
    PETS_URL: options.upstream ?? 'http://127.0.0.1:9',
    ADMIN_TOKEN,
    REDIS_PREFIX: prefix,
    UPSTREAM_TIMEOUT_MS: '2000',
    // In process, the gateway's event loop is the test worker's, shared with the test, its other
    // gateways and upstreams: its delay measures the machine's load, not the gateway's, and under
    // a loaded CI it shed requests with 503 in tests about something else. The overload suites
    // set it.
    OVERLOAD_EVENT_LOOP_DELAY_MS: '0',
    // Likewise a Redis command's 250 ms: on a loaded CI a script call that waited its turn behind
    // the test's other work timed out, and the replicas decided on their fallbacks (119 of 60
    // admitted in a test of exact shared counts). The fault suites set their own.
    REDIS_COMMAND_TIMEOUT_MS: '2000',
    ...(options.redisUrl ? { REDIS_URL: options.redisUrl } : {}),
    ...options.env,
  });
  const clients = config.redis
    ? createRedisClients(config.redis, config.redisCommandTimeoutMs, {
        subscriber: options.pubsub !== false,
        limiter: true,
      })
    : null;
  const redis = clients ? await connected(clients.redis) : null;
  const limiterRedis = clients?.limiter ? await connected(clients.limiter) : null;
  // Not connected here: the event bus subscribes on a connection still starting, as in server.ts.
  const subscriber = clients?.subscriber ?? null;
  const logs = options.logs;
  const deps = await createDeps(
    config,
    {
      redis,
      subscriber,
      limiterRedis,
      ...(options.keyStore ? { keyStore: options.keyStore } : {}),
      ...(options.customerStore ? { customerStore: options.customerStore } : {}),
      ...(options.keysInRedis ? { keysRedis: redis } : {}),
      // NATS_URL in `env`: the regions' NATS, dialled as server.ts's clients dial it.
      ...(config.regions
        ? { nats: natsDialer(config.regions.natsUrl, config.regions.syncMs, `test-${config.regions.region}`) }
        : {}),
    },
    {
      defaultMetrics: false,
      ...(options.now ? { now: options.now } : {}),
      ...(options.eventProbeMs ? { eventProbeMs: options.eventProbeMs } : {}),
      ...(logs ? { logStream: { write: (line: string) => void logs.push(JSON.parse(line)) } } : {}),
    },
  );
  // Subscribed before the gateway answers, or a test's first event could go unheard.
  if (subscriber && options.waitForSubscription !== false)
    await vi.waitFor(() => expect(deps.events.isSubscribed).toBe(true), { timeout: 5_000, interval: 10 });
  const app = await buildApp(config, deps);
  await app.ready();
  let adminApp: Promise<FastifyInstance> | undefined;
  let adminBuilt: FastifyInstance | undefined;
  const built = (): Promise<FastifyInstance> => {
    adminApp ??= buildAdminApp(config, deps).then((instance) => {
      adminBuilt = instance;
      return instance;
    });
    return adminApp;
  };
  const admin: TestAdmin = {
    inject: async (options) => (await built()).inject(options),
    listen: async (options) => (await built()).listen(options),
    get server() {
      if (!adminBuilt) throw new Error('the test gateway’s admin listener was never used');
      return adminBuilt.server;
    },
  };
  let portalApp: Promise<FastifyInstance> | undefined;
  let portalBuilt: FastifyInstance | undefined;
  const builtPortal = (): Promise<FastifyInstance> => {
    portalApp ??= buildPortalApp(config, deps).then((instance) => {
      portalBuilt = instance;
      return instance;
    });
    return portalApp;
  };
  const portal: TestAdmin = {
    inject: async (options) => (await builtPortal()).inject(options),
    listen: async (options) => (await builtPortal()).listen(options),
    get server() {
      if (!portalBuilt) throw new Error('the test gateway’s portal listener was never used');
      return portalBuilt.server;
    },
  };
  const gateway: TestGateway = {
    app,
    admin,
    portal,
    deps,
    config,
    redis,
    limiterRedis,
    subscriber,
    url: '',
    async listen() {
      await app.listen({ host: '127.0.0.1', port: 0 });
      gateway.url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      return gateway.url;
    },
    async close() {
      if (adminApp) await (await adminApp).close();
      if (portalApp) await (await portalApp).close();
      await app.close();
      await deps.events.close();
      subscriber?.disconnect();
      redis?.disconnect();
      limiterRedis?.disconnect();
    },
  };
  return gateway;
}

/** Puts a key straight into the gateway's store and returns its plaintext. */
export async function addKey(deps: GatewayDeps, plan: Plan, limits?: Limits): Promise<{ id: string; key: string }> {
  const { key, record } = createKey({ plan, name: `test-${plan}`, limits });
  await deps.keyStore.insert(record);
  return { id: record.id, key };
}

export function bearer(key: string): { authorization: string } {
  return { authorization: `Bearer ${key}` };
}

/**
 * A stand-in upstream that reports what it received. It also sends rate-limit headers of its
 * own, which the gateway must never pass through.
 */
export async function startEchoUpstream(): Promise<{ url: string; app: FastifyInstance; close(): Promise<void> }> {
  const app = Fastify();
  app.all('/v1/*', async (request, reply) => {
    reply.header('x-ratelimit-limit', '999999');
    reply.header('x-ratelimit-remaining', '999999');
    reply.header('ratelimit', '"upstream";r=1;t=1');
    reply.header('ratelimit-policy', '"upstream";q=1;w=1');
    if (request.url.startsWith('/v1/pets/404')) {
      return reply.code(404).send({ code: 'not_found', message: 'No route', status: 404 });
    }
    return { method: request.method, url: request.url, headers: request.headers };
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    app,
    close: () => app.close(),
  };
}

/**
 * A test file's Redis and one client on it (commands bounded at 2 s: a store's contract is not
 * about timeouts), for its store suites: started before its tests, stopped after. Call at the top
 * level of the file; the getter works inside tests.
 */
export function useRedisClient(): () => Redis {
  let redis: TestRedis | undefined;
  let client: Redis | undefined;
  beforeAll(async () => {
    redis = await startRedis();
    client = await connected(redisClient(redis.url, 2_000));
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });
  return () => {
    if (!client) throw new Error('useRedisClient: no Redis (did its beforeAll fail?)');
    return client;
  };
}

/**
 * A test file's gateways: one Redis and one echo upstream for the whole file, and every gateway
 * started through `start` closed after its test. Call at the top level of the file.
 */
export function useGateways() {
  let redis: TestRedis | undefined;
  let upstream: Awaited<ReturnType<typeof startEchoUpstream>> | undefined;
  const open: TestGateway[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startEchoUpstream();
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((g) => g.close()));
  });
  afterAll(async () => {
    await upstream?.close();
    await redis?.stop();
  });
  return {
    /** A gateway on the file's Redis in front of the echo upstream; options override either. */
    async start(options: GatewayOptions = {}): Promise<TestGateway> {
      if (!redis || !upstream) throw new Error('useGateways: start gateways inside tests');
      const gw = await startGateway({ redisUrl: redis.url, upstream: upstream.url, ...options });
      open.push(gw);
      return gw;
    },
  };
}
