import { randomUUID } from 'node:crypto';
import { createLogger } from '@animal-store/common/http.js';
import { createRegistry } from '@animal-store/common/metrics.js';
import type { FastifyBaseLogger } from 'fastify';
import type { Db } from 'mongodb';
import type { Registry } from 'prom-client';
import { type CreditRecord, creditOwnerOf } from './billing/credit-owner.js';
import type { GatewayConfig } from './config.js';
import { BalanceExpiryRepair } from './credits/balance-expiry-repair.js';
import type { CreditLedger } from './credits/credit-ledger.js';
import { CreditRefunds } from './credits/credit-refunds.js';
import { MemoryCreditLedger } from './credits/memory-credit-ledger.js';
import { RedisCreditLedger } from './credits/redis-credit-ledger.js';
import { type CustomerLocks, MemoryCustomerLocks, RedisCustomerLocks } from './customers/customer-locks.js';
import { CustomerResolver } from './customers/customer-resolver.js';
import type { CustomerRecord, CustomerStore } from './customers/customer-store.js';
import { toCustomerRecord } from './customers/customers-file.js';
import { FileCustomers } from './customers/file-customers.js';
import { MemoryCustomerStore } from './customers/memory-customer-store.js';
import { MongoCustomerStore } from './customers/mongo-customer-store.js';
import { MemoryPortalSessionStore, type PortalSessionStore } from './customers/portal-session-store.js';
import { RedisCustomerStore } from './customers/redis-customer-store.js';
import { RedisPortalSessionStore } from './customers/redis-portal-session-store.js';
import { type IdempotencyStore, MemoryIdempotencyStore } from './idempotency/idempotency-store.js';
import { RedisIdempotencyStore } from './idempotency/redis-idempotency-store.js';
import { KeyResolver } from './keys/key-resolver.js';
import type { KeyStore } from './keys/key-store.js';
import { toKeyRecord } from './keys/keys-file.js';
import { MemoryKeyStore } from './keys/memory-key-store.js';
import { MongoKeyStore } from './keys/mongo-key-store.js';
import { RedisKeyStore } from './keys/redis-key-store.js';
import { type LeakStore, MemoryLeakStore, RedisLeakStore } from './leaks/leak-store.js';
import { keysReader, PartnerKeys } from './leaks/partner-keys.js';
import { MemoryReplayGuard, RedisReplayGuard, type ReplayGuard } from './leaks/replay-guard.js';
import { AnonymousLimiter } from './limits/anonymous-limiter.js';
import { type AuthFailures, MemoryAuthFailures } from './limits/auth-failures.js';
import { MemoryKeyLimiter } from './limits/engines/memory-key-limiter.js';
import { RedisKeyLimiter } from './limits/engines/redis-key-limiter.js';
import { GuardedLimiter, limiterHealthLog } from './limits/guarded-limiter.js';
import type { KeyLimiter } from './limits/key-limiter.js';
import { PortalAddressLimits } from './limits/portal-address-limits.js';
import { RedisAuthFailures } from './limits/redis-auth-failures.js';
import { MeteringCloser } from './metering/closer.js';
import { cloudEvent } from './metering/metering-event.js';
import { MemoryMeteringStore, type MeteringStore } from './metering/metering-store.js';
import { RedisMeteringStore } from './metering/redis-metering-store.js';
import { createGatewayMetrics, type GatewayMetrics } from './observability/metrics.js';
import type { PlanBook } from './plans/plans.js';
import type { RedisClient } from './redis/clients.js';
import { RegionCounts } from './regions/region-counts.js';
import { type NatsDialer, RegionSync } from './regions/region-sync.js';
import { RegionalLimiter } from './regions/regional-limiter.js';
import { type EventBus, LocalEventBus, RedisEventBus, type SubscriptionHooks } from './replicas/event-bus.js';
import { RedisUsageHistory } from './usage/redis-usage-history.js';
import { isCustomerId, MemoryUsageHistory, type UsageHistory } from './usage/usage-history.js';
import { FileSpoolStore, MemorySpoolStore, UsageSpool } from './usage/usage-spool.js';
import { createWebhooks } from './webhooks/create-webhooks.js';
import type { Webhooks } from './webhooks/webhooks.js';

/** Connections made by server.ts (or a test); the gateway never opens its own. */
export interface GatewayClients {
  /** Standalone, Sentinel or Cluster (see redis/clients.ts). */
  redis?: RedisClient | null;
  /** A second connection for pub/sub, which blocks a connection for anything else. */
  subscriber?: RedisClient | null;
  /**
   * The limit script's connection, with no command timeout (redis/clients.ts): the limiter times
   * its calls itself and takes back what a call counted whose reply came too late to be used.
   * Unset: the script shares `redis` and its timeout, and such a reply goes unseen.
   */
  limiterRedis?: RedisClient | null;
  /** The key store's MongoDB database. */
  keysDb?: Db | null;
  /** The Redis keys and customers live in when there is no MongoDB (server.ts: config.keysIn). */
  keysRedis?: RedisClient | null;
  /** A store to use as it is: several in-process replicas sharing one, as they would share MongoDB. */
  keyStore?: KeyStore;
  /** As keyStore: one customer store shared by in-process replicas. */
  customerStore?: CustomerStore;
  /** The regions' NATS (NATS_URL): without it, or without config.regions, the gateway is one region. */
  nats?: NatsDialer | null;
}

export interface GatewayDeps {
  /** The plans in force and the route costs (config.plans). */
  plans: PlanBook;
  registry: Registry;
  metrics: GatewayMetrics;
  keyStore: KeyStore;
  /** The accounts above the keys, beside the keys (the same MongoDB database, Redis, or memory). */
  customerStore: CustomerStore;
  keyResolver: KeyResolver;
  /** Keys' customers, cached per replica beside the keys (the gate's shared windows come from them). */
  customerResolver: CustomerResolver;
  limiter: GuardedLimiter;
  /** Credit balances and their ledgers: in Redis beside the limits (the limit script spends them), or memory. */
  credits: CreditLedger;
  /**
   * With Redis, the start-up repair of balances the usage history once gave an expiry and hour
   * fields (credits/balance-expiry-repair.ts; app.ts runs it after listening); null in memory.
   */
  balanceRepair: BalanceExpiryRepair | null;
  /** Gives back, in batches, the credits of admitted requests the upstream never served (the proxy feeds it). */
  creditRefunds: CreditRefunds;
  /** Each key's decisions per hour: in Redis beside the limits, or this process's memory. */
  history: UsageHistory;
  /**
   * With Redis, the fallback's decisions while it is away, written into the history once it is
   * back (memory, or USAGE_SPOOL_DIR's files); null in the embedded mode, which never falls back.
   */
  usageSpool: UsageSpool | null;
  anonymous: AnonymousLimiter;
  events: EventBus;
  /** Subscriptions, the delivery queue and the events that feed it (webhooks/). */
  webhooks: Webhooks;
  /** The metering export's closed hours: a Redis stream beside the history, or this process's memory. */
  metering: MeteringStore;
  /** Closes hours into `metering` on every replica (app.ts runs it), each revision once. */
  meteringCloser: MeteringCloser;
  /** What each admin Idempotency-Key did (admin/idempotency.ts): in Redis, or this process's memory. */
  idempotency: IdempotencyStore;
  /** The portal's sign-in links and sessions: in Redis (every replica signs in alike), or this process's memory. */
  portalSessions: PortalSessionStore;
  /** The portal listener's per-address limits: in Redis (shared by the replicas), or this process's memory. */
  portalAddresses: PortalAddressLimits;
  /** Wrong admin tokens per address (admin/auth-limit.ts): in Redis (counted across replicas), or this process's memory. */
  adminAuthFailures: AuthFailures;
  /** One key create at a time per customer, so maxKeys is exact: in Redis (across replicas), or this process's. */
  customerLocks: CustomerLocks;
  /** The exchange of counts with the other regions (NATS_URL); null: one region, nothing on the hot path. */
  regions: RegionSync | null;
  /** Proven leak reports (leaks/): in Redis (every replica's in one list), or this process's memory. */
  leaks: LeakStore;
  /** The signatures of the scanner reports already taken: in Redis (a replay to any replica is refused), or memory. */
  leakReplays: ReplayGuard;
  /** The scanner's public keys (LEAK_PUBLIC_KEYS), read when first needed; null when none are configured. */
  partnerKeys: PartnerKeys | null;
  now: () => number;
  /** The public listener's logger, also used by collaborators that log on their own (limiter, events). */
  logger: FastifyBaseLogger;
  /** Where every listener's log lines go, when not stdout. */
  logStream?: LogStream;
  /** One line per store saying which backend it uses, for the start-up log. */
  backends: { keyStore: string; customerStore: string; limiter: string; events: string; webhooks: string };
}

type LogStream = { write(line: string): void };

/**
 * The customer store: the one given, else beside the keys (MongoDB, else Redis, else memory); with
 * API_KEYS_FILE's customers read-only in front of it when the file has some.
 */
async function customerStoreFor(
  clients: GatewayClients,
  prefix: string,
  fromFile: readonly CustomerRecord[],
): Promise<CustomerStore> {
  let store: CustomerStore;
  if (clients.customerStore) store = clients.customerStore;
  else if (clients.keysDb) store = new MongoCustomerStore(clients.keysDb);
  else if (clients.keysRedis) store = new RedisCustomerStore(clients.keysRedis, prefix);
  else store = new MemoryCustomerStore();
  return fromFile.length > 0 ? new FileCustomers(store, fromFile) : store;
}

/** A store's backend in the start-up log, saying what a restart does to it. */
const DURABILITY: Record<KeyStore['kind'], string> = {
  mongo: 'mongo',
  redis: 'redis (kept as long as Redis persists)',
  memory: 'memory (lost when the process stops)',
};

/**
 * The portal's sessions and address limits, the customer locks its key creates take, and the admin
 * listener's count of wrong tokens: in Redis (shared by the replicas), or memory.
 */
function portalDeps(
  config: GatewayConfig,
  redis: RedisClient | null,
  now: () => number,
): Pick<GatewayDeps, 'portalSessions' | 'portalAddresses' | 'customerLocks' | 'adminAuthFailures'> {
  const timing = { now, idleMs: config.portalSessionIdleMs };
  return {
    portalSessions: redis
      ? new RedisPortalSessionStore(redis, config.redisPrefix, timing)
      : new MemoryPortalSessionStore(timing),
    customerLocks: redis ? new RedisCustomerLocks(redis, config.redisPrefix) : new MemoryCustomerLocks(),
    adminAuthFailures: redis ? new RedisAuthFailures(redis, config.redisPrefix) : new MemoryAuthFailures(),
    portalAddresses: new PortalAddressLimits(
      config.portalPerMinute,
      config.portalSignInPerMinute,
      redis,
      config.redisPrefix,
    ),
  };
}

/** Builds every collaborator of the gateway from its config and clients: the one composition root. */
export async function createDeps(
  config: GatewayConfig,
  clients: GatewayClients = {},
  options: {
    now?: () => number;
    defaultMetrics?: boolean;
    /** Where every listener's log lines go (server.ts: logDestination(); tests capture them). */
    logStream?: LogStream;
    /** How often the event bus checks its subscription with a probe (events.ts PROBE_MS). */
    eventProbeMs?: number;
  } = {},
): Promise<GatewayDeps> {
  const now = options.now ?? Date.now;
  const registry = createRegistry('gateway', options.defaultMetrics ?? true);
  const metrics = createGatewayMetrics(registry);
  // Made first: the limiter and the event bus log before any listener exists.
  const logger = createLogger({ serviceName: 'gateway', logLevel: config.logLevel, logStream: options.logStream });
  const redis = clients.redis ?? null;

  const keyStore = await createKeyStore(clients, config.redisPrefix);
  const loadedAt = new Date(now());
  const fileRecords = config.apiKeys.map((e) => toKeyRecord(e, loadedAt));
  const keyResolver = new KeyResolver(keyStore, fileRecords, {
    maxEntries: config.keyCacheMax,
    positiveTtlMs: config.keyCacheTtlMs,
    negativeTtlMs: Math.min(config.keyCacheTtlMs, 60_000),
    onStoreCall: (operation, seconds, ok) =>
      metrics.keyStore.observe({ operation, outcome: ok ? 'ok' : 'error' }, seconds),
  });

  const regions = regionSyncFor(config, clients, { now, logger, metrics });
  const regional = regions
    ? (inner: KeyLimiter): KeyLimiter => new RegionalLimiter(inner, regions.counts, now)
    : (inner: KeyLimiter): KeyLimiter => inner;
  const limits = { now, logger, metrics, regional };
  const { credits, balanceRepair, history, usageSpool, limiter, shared } = limitsAndUsage(
    config,
    redis,
    clients.limiterRedis ?? null,
    limits,
  );
  const anonymous = new AnonymousLimiter(config.anonPerMinute, redis, config.redisPrefix, now);

  const subscriber = clients.subscriber ?? null;
  const events = createEventBus(config, redis, subscriber, { logger, metrics, probeMs: options.eventProbeMs });
  const webhooks = createWebhooks(config, redis, { registry, logger, keyStore, keyResolver, now });

  const fileCustomers = config.apiKeyCustomers.map((e) => toCustomerRecord(e, loadedAt));
  const customerStore = await customerStoreFor(clients, config.redisPrefix, fileCustomers);
  const customerResolver = new CustomerResolver(customerStore, fileCustomers, {
    maxEntries: config.keyCacheMax,
    ttlMs: config.keyCacheTtlMs,
  });
  const creditRefunds = creditRefundsFor(
    config.plans,
    credits,
    { customerResolver, keyResolver, keyStore },
    { now, logger, spool: usageSpool },
  );
  if (shared) refundLateCalls(shared, creditRefunds, { logger, metrics });
  return {
    plans: config.plans,
    logger,
    ...(options.logStream ? { logStream: options.logStream } : {}),
    registry,
    metrics,
    keyStore,
    customerStore,
    keyResolver,
    customerResolver,
    ...createMetering(config, redis, { history, customerStore, keyResolver, keyStore, webhooks, now, logger }),
    limiter,
    credits,
    balanceRepair,
    creditRefunds,
    history,
    usageSpool,
    anonymous,
    events,
    webhooks,
    idempotency: redis ? new RedisIdempotencyStore(redis, config.redisPrefix) : new MemoryIdempotencyStore(now),
    ...portalDeps(config, redis, now),
    regions,
    ...leakDeps(config, redis, now),
    now,
    backends: backendsOf(config, {
      keyStore,
      customerStore,
      fileRecords,
      webhooks,
      redis,
      pubsub: subscriber !== null,
    }),
  };
}

/** The exchange of counts with the other regions, when NATS_URL names one (regions/, docs/regions.md). */
function regionSyncFor(
  config: GatewayConfig,
  clients: GatewayClients,
  { now, logger, metrics }: { now: () => number; logger: FastifyBaseLogger; metrics: GatewayMetrics },
): RegionSync | null {
  if (!config.regions || !clients.nats) return null;
  const { region, staleMs, share, syncMs } = config.regions;
  const counts = new RegionCounts({ region, source: `${region}-${randomUUID().slice(0, 8)}`, staleMs, share }, now);
  return new RegionSync(counts, clients.nats, { syncMs, logger, metrics });
}

/**
 * A limit call answered too late to be used (RedisKeyLimiter's unanswered) spent credits for
 * requests answered without it (a 503): they go back as an unserved request's do, and it is logged.
 */
function refundLateCalls(
  shared: RedisKeyLimiter,
  refunds: CreditRefunds,
  { logger, metrics }: { logger: FastifyBaseLogger; metrics: GatewayMetrics },
): void {
  shared.whenUnanswered((call) => {
    metrics.limiterLateReplies.inc();
    if (call.credits > 0) refunds.upstreamFailed(call.owner, call.credits, call.at);
    logger.warn(
      { owner: call.owner, decisions: call.decisions, credits: call.credits },
      'rate limiter: a Redis call answered after its timeout had run; its decisions are taken back and its credits refunded',
    );
  });
}

/** Leak reports, their replay guard and the scanner's public keys (leaks/, docs/leaks.md). */
function leakDeps(
  config: GatewayConfig,
  redis: RedisClient | null,
  now: () => number,
): Pick<GatewayDeps, 'leaks' | 'leakReplays' | 'partnerKeys'> {
  return {
    leaks: redis ? new RedisLeakStore(redis, config.redisPrefix) : new MemoryLeakStore(now),
    leakReplays: redis ? new RedisReplayGuard(redis, config.redisPrefix) : new MemoryReplayGuard(now),
    partnerKeys: config.leaks.publicKeys
      ? new PartnerKeys(keysReader(config.leaks.publicKeys), config.leaks.publicKeysTtlMs, now)
      : null,
  };
}

/** One line per store for the start-up log: where keys, customers, limits, events and webhooks live. */
function backendsOf(
  config: GatewayConfig,
  parts: Pick<GatewayDeps, 'keyStore' | 'customerStore' | 'webhooks'> & {
    fileRecords: unknown[];
    redis: RedisClient | null;
    pubsub: boolean;
  },
): GatewayDeps['backends'] {
  const { keyStore, customerStore, fileRecords, webhooks, redis, pubsub } = parts;
  return {
    keyStore: `${DURABILITY[keyStore.kind]}${fileRecords.length ? ` + ${fileRecords.length} keys from ${config.apiKeysFile}` : ''}${config.apiKeyCustomers.length ? ` + ${config.apiKeyCustomers.length} customers from it` : ''}`,
    customerStore: DURABILITY[customerStore.kind],
    limiter: redis
      ? `redis ${config.redis?.mode ?? ''} (failure mode ${config.failureMode})`
      : 'memory (embedded: limits are per process)',
    events: redis && pubsub ? 'redis pub/sub' : 'in-process',
    webhooks: webhooks.queue.kind,
  };
}

/**
 * The limiter with its credits and usage history: in Redis, with the per-replica fallback and the
 * spool of its decisions for when Redis is away; or the embedded memory limiter, ledger and history.
 */
function limitsAndUsage(
  config: GatewayConfig,
  redis: RedisClient | null,
  /** The limit script's own connection (GatewayClients.limiterRedis); null: it shares `redis`. */
  scriptRedis: RedisClient | null,
  {
    now,
    logger,
    metrics,
    regional,
  }: {
    now: () => number;
    logger: FastifyBaseLogger;
    metrics: GatewayMetrics;
    /** Wraps the primary limiter with the other regions' counts (regions/regional-limiter.ts), or not. */
    regional: (inner: KeyLimiter) => KeyLimiter;
  },
): Pick<GatewayDeps, 'credits' | 'balanceRepair' | 'history' | 'usageSpool' | 'limiter'> & {
  shared: RedisKeyLimiter | null;
} {
  // Embedded, the memory limiter spends from the ledger's balances; as Redis's per-replica fallback
  // it is never asked about a request that spends credits (the balances are in Redis: 503).
  const memoryCredits = redis ? null : new MemoryCreditLedger(config.creditsLedgerMs);
  const credits: CreditLedger =
    memoryCredits ?? new RedisCreditLedger(redis as RedisClient, config.redisPrefix, config.creditsLedgerMs);
  const balanceRepair = redis ? new BalanceExpiryRepair(redis, config.redisPrefix, logger) : null;
  const memoryLimiter = new MemoryKeyLimiter(config.ban, now, undefined, memoryCredits);
  const redisHistory = redis
    ? new RedisUsageHistory(redis, config.redisPrefix, config.usageHistoryMs, (err) =>
        logger.warn({ err }, 'usage history: a write failed; some counts are missing from it'),
      )
    : null;
  const history: UsageHistory = redisHistory ?? new MemoryUsageHistory(config.usageHistoryMs, now);
  const usageSpool = redisHistory
    ? new UsageSpool({
        store: config.usageSpoolDir ? new FileSpoolStore(config.usageSpoolDir) : new MemorySpoolStore(),
        replay: (segment) => redisHistory.replay(segment),
        log: logger,
      })
    : null;
  // The history's batches that cannot be written while Redis is away wait there too.
  if (redisHistory && usageSpool) redisHistory.spoolTo((record) => usageSpool.append(record));
  const shared = redis
    ? new RedisKeyLimiter(
        redis,
        config.redisPrefix,
        config.ban,
        now,
        redisHistory,
        config.redisCommandTimeoutMs,
        scriptRedis ?? redis,
      )
    : null;
  const limiter = new GuardedLimiter(
    shared
      ? {
          kind: 'shared',
          primary: regional(shared),
          fallback: memoryLimiter,
          mode: config.failureMode,
          hooks: limiterHealthLog(logger, metrics, config.failureMode),
          ...(usageSpool ? { spool: usageSpool } : {}),
        }
      : { kind: 'memory', primary: regional(memoryLimiter) },
    now,
    history,
  );
  return { credits, balanceRepair, history, usageSpool, limiter, shared };
}

/** The refunds of unserved requests' credits, to owners whose credit terms are still on. */
function creditRefundsFor(
  plans: PlanBook,
  credits: CreditLedger,
  stores: { customerResolver: CustomerResolver; keyResolver: KeyResolver; keyStore: KeyStore },
  { now, logger, spool }: { now: () => number; logger: FastifyBaseLogger; spool: UsageSpool | null },
): CreditRefunds {
  /** The owner's record as it is now (a customer, or a key still standing for itself), or why none. */
  const recordOf = async (owner: string): Promise<CreditRecord | string> => {
    if (isCustomerId(owner)) {
      const customer = await stores.customerResolver.fetch(owner);
      return customer ? { kind: 'customer', record: customer } : 'the customer is gone';
    }
    // API_KEYS_FILE's keys first, as the gate finds them: the store does not hold them.
    const key = stores.keyResolver.fileRecord(owner) ?? (await stores.keyStore.get(owner));
    if (!key) return 'the key is gone';
    // A key that has joined a customer since spends its customer's balance, no longer its own.
    if (key.customerId !== undefined) return `the key has joined customer ${key.customerId} since`;
    return { kind: 'key', record: key };
  };
  const refunds = new CreditRefunds({
    ledger: credits,
    // The terms in force now (its own, else its plan's): none, nothing given back.
    ruleOf: async (owner) => {
      const record = await recordOf(owner);
      if (typeof record === 'string') return { dropped: record };
      const credit = creditOwnerOf(plans, record);
      return credit.terms ? { rule: credit.rule } : { dropped: 'its credits are turned off since' };
    },
    now,
    onError: (err) => logger.warn({ err }, 'credits: a refund of unserved requests was not written'),
    onDropped: ({ owner, hour, units, reason }) =>
      logger.warn(
        { [isCustomerId(owner) ? 'customerId' : 'keyId']: owner, hour: new Date(hour).toISOString(), units, reason },
        `credits: ${units} credits of ${owner}'s unserved requests not given back: ${reason}`,
      ),
    // Redis away: a refund waits in the usage spool and is given back, once, when Redis answers.
    ...(spool
      ? {
          spool: {
            append: (record) => spool.append(record),
            spooled: (count) =>
              logger.warn(
                { refunds: count },
                `credits: ${count} refunds of unserved requests wait in the usage spool until Redis answers`,
              ),
          },
        }
      : {}),
  });
  spool?.replayRefundsWith((records) => refunds.replay(records));
  return refunds;
}

/** The metering export's store (beside the history: Redis, or memory) and its closer. */
function createMetering(
  config: GatewayConfig,
  redis: RedisClient | null,
  parts: Pick<GatewayDeps, 'history' | 'customerStore' | 'keyResolver' | 'keyStore' | 'webhooks' | 'now' | 'logger'>,
): Pick<GatewayDeps, 'metering' | 'meteringCloser'> {
  const { keyResolver, keyStore, webhooks } = parts;
  const metering: MeteringStore = redis
    ? new RedisMeteringStore(redis, config.redisPrefix, config.usageHistoryMs)
    : new MemoryMeteringStore();
  const meteringCloser = new MeteringCloser({
    ...parts,
    store: metering,
    // Asked once per customer hour appended: no cache needed.
    customers: parts.customerStore,
    key: async (id) => keyResolver.fileRecord(id) ?? keyStore.get(id),
    onRecorded: (record) => webhooks.usageReported(cloudEvent(record)),
    closeDelayMs: config.metering.closeDelayMs,
  });
  return { metering, meteringCloser };
}

/** The store given, MongoDB when its database is, Redis when keys live there, or this process's memory. */
async function createKeyStore(clients: GatewayClients, prefix: string): Promise<KeyStore> {
  if (clients.keyStore) return clients.keyStore;
  if (clients.keysRedis) return new RedisKeyStore(clients.keysRedis, prefix);
  if (!clients.keysDb) return new MemoryKeyStore();
  return new MongoKeyStore(clients.keysDb);
}

/** Redis pub/sub between the replicas when both connections are given, else this process alone. */
function createEventBus(
  config: GatewayConfig,
  redis: RedisClient | null,
  subscriber: RedisClient | null,
  parts: { logger: FastifyBaseLogger; metrics: GatewayMetrics; probeMs: number | undefined },
): EventBus {
  if (redis && subscriber) {
    return new RedisEventBus(
      redis,
      subscriber,
      `${config.redisPrefix}events`,
      subscriptionLog(parts.logger, parts.metrics, config.revocationPollMs),
      parts.probeMs,
    );
  }
  // In one process every "replica" hears every event.
  parts.metrics.eventBusSubscribed.set(1);
  return new LocalEventBus();
}

/** The subscription's state as a gauge, a warning when it is lost and a line when it is back. */
function subscriptionLog(logger: FastifyBaseLogger, metrics: GatewayMetrics, pollMs: number): SubscriptionHooks {
  metrics.eventBusSubscribed.set(0);
  return {
    onUp: (again) => {
      metrics.eventBusSubscribed.set(1);
      logger.info(
        again
          ? 'key events: subscription back; changes made on other replicas apply here at once again'
          : 'key events: subscribed; changes made on other replicas apply here at once',
      );
    },
    onDown: (reason) => {
      metrics.eventBusSubscribed.set(0);
      logger.warn(
        { reason },
        `key events: not subscribed (${reason}); changes made on other replicas apply here only at the next key store poll (every ${pollMs} ms) until it is back`,
      );
    },
  };
}
