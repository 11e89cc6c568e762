import type { MongoTarget } from '@animal-store/common/env.js';
import { exitIfNodeTooOld } from '@animal-store/common/node-version.js';
import type { Listener } from '@animal-store/common/serve.js';
import type { GatewayConfig } from './config.js';

// Before anything else loads: on an older Node a dependency fails as it loads (undici reads a zlib
// function Node 20 lacks) with a TypeError that names no version. So the rest is imported after.
exitIfNodeTooOld('gateway');

const [
  { ConfigError, redactUrl },
  { logDestination },
  { buildMetricsApp },
  { mongoAtStart },
  { requireIndexes },
  { migrateCommand },
  { serve, StartupError },
  { buildAdminApp },
  { buildApp },
  { buildLeakApp },
  { buildPortalApp },
  { loadConfig, loadMigrationConfig },
  { createDeps },
  { closeClients, openClients },
  { describeRedis },
  { GATEWAY_INDEXES, GATEWAY_MIGRATION },
] = await Promise.all([
  import('@animal-store/common/env.js'),
  import('@animal-store/common/log-destination.js'),
  import('@animal-store/common/metrics.js'),
  import('@animal-store/common/mongo/errors.js'),
  import('@animal-store/common/mongo/indexes.js'),
  import('@animal-store/common/mongo/migrate.js'),
  import('@animal-store/common/serve.js'),
  import('./admin/app.js'),
  import('./app.js'),
  import('./leak-receiver/app.js'),
  import('./portal/app.js'),
  import('./config.js'),
  import('./deps.js'),
  import('./external-clients.js'),
  import('./redis/clients.js'),
  import('./migrations.js'),
]);

/** `server.js migrate`: builds the indexes and runs the data migrations of MONGO_URL's database, then exits. */
async function migrate(): Promise<void> {
  let target: MongoTarget;
  try {
    target = loadMigrationConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`gateway migrate: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  process.exit(await migrateCommand('gateway', target, GATEWAY_MIGRATION));
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

  const clients = openClients(config);
  if (clients.keysDb && config.mongoUrl) {
    // Only read here: the indexes are built by `npm run migrate`, not under the request timeouts.
    const { mongoUrl: url, mongoDb: db } = config;
    await requireIndexes('gateway', clients.keysDb, GATEWAY_INDEXES, { url, db }).catch((err: unknown) => {
      throw mongoAtStart(err, url);
    });
  }

  // One asynchronous stdout for every listener of this process, flushed by serve() at shutdown.
  const deps = await createDeps(config, clients, { logStream: logDestination() }).catch((err: unknown) => {
    // A MongoDB lost since the index check shows here.
    throw config.mongoUrl ? mongoAtStart(err, config.mongoUrl) : err;
  });
  const app = await buildApp(config, deps);
  const listeners: Listener[] = [
    { app, host: config.host, port: config.port, hostVariable: 'HOST', portVariable: 'PORT' },
  ];
  if (config.adminToken) {
    const admin = await buildAdminApp(config, deps);
    listeners.push({
      app: admin,
      host: config.adminHost,
      port: config.adminPort,
      hostVariable: 'ADMIN_HOST',
      portVariable: 'ADMIN_PORT',
    });
    // Sign-in links come from the admin API: without it there is no way into the portal.
    const portal = await buildPortalApp(config, deps);
    listeners.push({
      app: portal,
      host: config.portalHost,
      port: config.portalPort,
      hostVariable: 'PORTAL_HOST',
      portVariable: 'PORTAL_PORT',
    });
  } else {
    app.log.warn('admin API off: set ADMIN_TOKEN to enable it');
  }
  // Off unless LEAK_PORT is set: the secret-scanning receiver, on a listener of its own (docs/leaks.md).
  if (config.leaks.port !== undefined) {
    listeners.push({
      app: await buildLeakApp(config, deps),
      host: config.leaks.host,
      port: config.leaks.port,
      hostVariable: 'LEAK_HOST',
      portVariable: 'LEAK_PORT',
    });
  }
  const metrics = await buildMetricsApp(deps.registry, {
    serviceName: 'gateway',
    logLevel: config.logLevel,
    logStream: deps.logStream,
  });
  listeners.push({
    app: metrics,
    host: config.metricsHost,
    port: config.metricsPort,
    hostVariable: 'METRICS_HOST',
    portVariable: 'METRICS_PORT',
  });

  await app.register(closeClients, { clients, events: deps.events });

  // A warning while limits are per process, or keys and customers end with it.
  const level = config.redis && config.keysIn !== 'memory' ? 'info' : 'warn';
  app.log[level](
    {
      keyStore: deps.backends.keyStore,
      customerStore: deps.backends.customerStore,
      limiter: deps.backends.limiter,
      events: deps.backends.events,
      webhooks: deps.backends.webhooks,
      redis: config.redis ? describeRedis(config.redis) : 'none',
      mongo: config.mongoUrl ? redactUrl(config.mongoUrl) : 'none',
      upstream: config.petsUrl,
    },
    `backends: keys=${deps.backends.keyStore}, customers=${deps.backends.customerStore}, limiter=${deps.backends.limiter}, webhooks=${deps.backends.webhooks}, redis=${config.redis?.mode ?? 'none'}`,
  );
  await serve(listeners, config.shutdownGraceMs);
  // Forked by npm start (scripts/start.mjs) with an IPC channel: every listener listens now. It
  // learns so from this message, not by polling /readyz, whose probes would fill the log.
  process.send?.({ ready: true });
}

(process.argv[2] === 'migrate' ? migrate() : main()).catch((err) => {
  // What the operator fixes in the environment is one line; anything else is a bug, with its stack.
  const text = err instanceof StartupError ? err.message : err instanceof Error ? err.stack : String(err);
  process.stderr.write(`gateway${err instanceof StartupError ? '' : ' failed to start'}: ${text}\n`);
  process.exit(1);
});
