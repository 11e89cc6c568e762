import { SERVER_SELECTION_TIMEOUT_MS } from '@animal-store/common/mongo/options.js';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { type Db, MongoClient, type MongoClientOptions } from 'mongodb';
import { connect } from 'nats';
import type { GatewayConfig } from './config.js';
import { createRedisClients, type RedisClient } from './redis/clients.js';
import type { NatsDialer } from './regions/region-sync.js';
import type { EventBus } from './replicas/event-bus.js';

/** The gateway's connections to the outside: opened by openClients, closed by closeClients. */
export interface ExternalClients {
  redis: RedisClient | null;
  /** A second Redis connection for pub/sub, which blocks a connection for anything else. */
  subscriber: RedisClient | null;
  /** The limit script's Redis connection, untimed: the limiter times its calls (redis/clients.ts). */
  limiterRedis: RedisClient | null;
  mongoClient: MongoClient | null;
  /** The key store's database, when MongoDB is configured. */
  keysDb: Db | null;
  /** The key and customer stores' Redis (the limits' connection), when keys live in Redis (config.keysIn). */
  keysRedis: RedisClient | null;
  /** Opens the regions' NATS connection (NATS_URL); the region sync dials and redials it. */
  nats: NatsDialer | null;
}

/**
 * The regions' NATS connection. It reconnects for ever (a partition heals) and soon (every sync
 * interval): while it is away the region enforces shares. The first connect is the region sync's,
 * retried there, so the gateway starts and serves without NATS.
 */
export function natsDialer(url: string, syncMs: number, name: string): NatsDialer {
  return () =>
    connect({
      servers: url,
      name,
      maxReconnectAttempts: -1,
      reconnectTimeWait: Math.min(2_000, syncMs),
      pingInterval: Math.max(1_000, 4 * syncMs),
      timeout: 2_000,
    });
}

/**
 * The gateway's MongoDB client, set once here (docs/mongodb.md, "Writes and reads"). Server
 * selection outlasts an election (SERVER_SELECTION_TIMEOUT_MS), so a revoke or a key change sent
 * while the replica set has no primary waits for the new one, and the driver's one retry of a
 * write (retryWrites) or read (retryReads) met by a step-down lands there too. Requests do not wait
 * that long: the gate bounds an uncached lookup (KEY_LOOKUP_TIMEOUT_MS) and reads it with
 * primaryPreferred (KEY_LOOKUP), lists carry maxTimeMS. A stalled server fails a socket in 5 s.
 */
export const GATEWAY_MONGO_OPTIONS: MongoClientOptions = {
  appName: 'animal-store-gateway',
  serverSelectionTimeoutMS: SERVER_SELECTION_TIMEOUT_MS,
  retryWrites: true,
  retryReads: true,
  connectTimeoutMS: 2_000,
  socketTimeoutMS: 5_000,
  waitQueueTimeoutMS: 2_000,
};

/** Creates every client the config asks for; they connect on their own (Redis) or at first use (MongoDB). */
export function openClients(config: GatewayConfig): ExternalClients {
  const {
    redis = null,
    subscriber = null,
    limiter: limiterRedis = null,
  } = config.redis ? createRedisClients(config.redis, config.redisCommandTimeoutMs, { limiter: true }) : {};
  const mongoClient = config.mongoUrl ? new MongoClient(config.mongoUrl, GATEWAY_MONGO_OPTIONS) : null;
  return {
    redis,
    subscriber,
    limiterRedis,
    mongoClient,
    keysDb: mongoClient?.db(config.mongoDb) ?? null,
    keysRedis: config.keysIn === 'redis' ? redis : null,
    nats: config.regions
      ? natsDialer(config.regions.natsUrl, config.regions.syncMs, `gateway-${config.regions.region}`)
      : null,
  };
}

/**
 * Closes the clients when the app closes: after in-flight requests have finished (fastify runs
 * onClose then), the event bus first so no handler runs on a closing connection.
 */
export const closeClients = fp(
  async (app: FastifyInstance, opts: { clients: ExternalClients; events: EventBus }) => {
    app.addHook('onClose', async () => {
      const { redis, subscriber, limiterRedis, mongoClient } = opts.clients;
      await opts.events.close();
      await Promise.allSettled([redis?.quit(), subscriber?.quit(), limiterRedis?.quit(), mongoClient?.close()]);
    });
  },
  { name: 'close-clients' },
);
