import { ConfigError, redactUrl } from '@animal-store/common/env.js';
import { type Listener, serve } from '@animal-store/common/serve.js';
import { Redis, type RedisOptions } from 'ioredis';
import { MongoClient } from 'mongodb';
import { buildAdminApp } from './admin/app.js';
import { buildApp } from './app.js';
import { type GatewayConfig, loadConfig } from './config.js';
import { createDeps } from './deps.js';

/**
 * Redis options for the request path: fail fast instead of queueing while disconnected, bound
 * every command by a timeout, pipeline commands issued in the same tick into one write, and
 * reconnect with capped, jittered backoff so replicas don't stampede a recovering Redis.
 */
function redisOptions(config: GatewayConfig): RedisOptions {
  return {
    commandTimeout: config.redisCommandTimeoutMs,
    connectTimeout: 2_000,
    enableOfflineQueue: false,
    enableAutoPipelining: true,
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(1_000, 50 * 2 ** Math.min(attempt, 5)) + Math.floor(Math.random() * 100),
  };
}

async function main(): Promise<void> {
  let config: GatewayConfig;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`gateway: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }

  const redis = config.redisUrl ? new Redis(config.redisUrl, redisOptions(config)) : null;
  // Subscribing must wait for a connection rather than fail, so this one queues while offline.
  const subscriber = redis?.duplicate({ enableOfflineQueue: true, commandTimeout: undefined }) ?? null;
  const mongo = config.mongoUrl
    ? new MongoClient(config.mongoUrl, {
        appName: 'animal-store-gateway',
        // A stalled MongoDB must fail a key lookup or a revocation poll in seconds, not hang it.
        serverSelectionTimeoutMS: 2_000,
        connectTimeoutMS: 2_000,
        socketTimeoutMS: 5_000,
        waitQueueTimeoutMS: 2_000,
      })
    : null;
  for (const client of [redis, subscriber]) client?.on('error', () => {});

  // The subscription is made before the app (and its logger) exists; failures are reported once it does.
  let reportEventsError = (err: unknown): void => {
    process.stderr.write(`gateway: pub/sub subscription failed: ${err}\n`);
  };
  const deps = await createDeps(
    config,
    { redis, subscriber, mongo: mongo?.db('gateway') ?? null },
    { onEventsError: (err) => reportEventsError(err) },
  );
  const app = await buildApp(config, deps);
  reportEventsError = (err) =>
    app.log.warn({ err }, 'pub/sub subscription failed: replicas learn of revocations by polling the key store');
  const listeners: Listener[] = [{ app, host: config.host, port: config.port }];
  if (config.adminToken) {
    const admin = await buildAdminApp(config, deps);
    listeners.push({ app: admin, host: config.adminHost, port: config.adminPort });
  } else {
    app.log.warn('admin API off: set ADMIN_TOKEN to enable it');
  }

  app.addHook('onClose', async () => {
    await deps.events.close();
    await Promise.allSettled([redis?.quit(), subscriber?.quit(), mongo?.close()]);
  });

  const level = config.redisUrl && config.mongoUrl ? 'info' : 'warn';
  app.log[level](
    {
      keyStore: deps.backends.keyStore,
      limiter: deps.backends.limiter,
      events: deps.backends.events,
      redis: config.redisUrl ? redactUrl(config.redisUrl) : 'none',
      mongo: config.mongoUrl ? redactUrl(config.mongoUrl) : 'none',
      upstream: config.petsUrl,
    },
    `backends: keys=${deps.backends.keyStore}, limiter=${deps.backends.limiter}`,
  );
  await serve(listeners, config.shutdownGraceMs);
}

main().catch((err) => {
  process.stderr.write(`gateway failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
