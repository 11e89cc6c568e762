import { ConfigError, redactUrl } from '@animal-store/common/env.js';
import { logDestination } from '@animal-store/common/log-destination.js';
import { buildMetricsApp } from '@animal-store/common/metrics.js';
import { type Listener, serve } from '@animal-store/common/serve.js';
import { buildAdminApp } from './admin/app.js';
import { buildApp } from './app.js';
import { type GatewayConfig, loadConfig } from './config.js';
import { createDeps } from './deps.js';
import { closeClients, openClients } from './external-clients.js';
import { describeRedis } from './redis/clients.js';

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

  // One asynchronous stdout for every listener of this process, flushed by serve() at shutdown.
  const deps = await createDeps(
    config,
    { redis: clients.redis, subscriber: clients.subscriber, keysDb: clients.keysDb },
    { logStream: logDestination() },
  );
  const app = await buildApp(config, deps);
  const listeners: Listener[] = [{ app, host: config.host, port: config.port }];
  if (config.adminToken) {
    const admin = await buildAdminApp(config, deps);
    listeners.push({ app: admin, host: config.adminHost, port: config.adminPort });
  } else {
    app.log.warn('admin API off: set ADMIN_TOKEN to enable it');
  }
  const metrics = await buildMetricsApp(deps.registry, {
    serviceName: 'gateway',
    logLevel: config.logLevel,
    logStream: deps.logStream,
  });
  listeners.push({ app: metrics, host: config.metricsHost, port: config.metricsPort });

  await app.register(closeClients, { clients, events: deps.events });

  const level = config.redis && config.mongoUrl ? 'info' : 'warn';
  app.log[level](
    {
      keyStore: deps.backends.keyStore,
      limiter: deps.backends.limiter,
      events: deps.backends.events,
      webhooks: deps.backends.webhooks,
      redis: config.redis ? describeRedis(config.redis) : 'none',
      mongo: config.mongoUrl ? redactUrl(config.mongoUrl) : 'none',
      upstream: config.petsUrl,
    },
    `backends: keys=${deps.backends.keyStore}, limiter=${deps.backends.limiter}, webhooks=${deps.backends.webhooks}, redis=${config.redis?.mode ?? 'none'}`,
  );
  await serve(listeners, config.shutdownGraceMs);
}

main().catch((err) => {
  process.stderr.write(`gateway failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
