import { exitIfNodeTooOld } from '@animal-store/common/node-version.js';
import type { Config } from './config.js';

// The only file that reads process.env, connects clients and listens.

// Before anything else loads, so that a Node too old for a dependency hears which one it needs
// instead of whatever that dependency trips on. So the rest is imported after.
exitIfNodeTooOld('pets');

const [
  { ConfigError, redactUrl },
  { logDestination },
  { buildMetricsApp, createRegistry },
  { mongoAtStart },
  { requireIndexes },
  { migrateCommand },
  { serve, StartupError },
  { MongoClient },
  { buildApp },
  { loadConfig, loadMigrationConfig },
  { PETS_INDEXES, PETS_MIGRATION },
  { MemoryPetStore },
  { MongoPetStore, mongoClientOptions },
] = await Promise.all([
  import('@animal-store/common/env.js'),
  import('@animal-store/common/log-destination.js'),
  import('@animal-store/common/metrics.js'),
  import('@animal-store/common/mongo/errors.js'),
  import('@animal-store/common/mongo/indexes.js'),
  import('@animal-store/common/mongo/migrate.js'),
  import('@animal-store/common/serve.js'),
  import('mongodb'),
  import('./app.js'),
  import('./config.js'),
  import('./migrations.js'),
  import('./store/memory-pet-store.js'),
  import('./store/mongo-pet-store.js'),
]);

function readConfig<T>(load: (env: typeof process.env) => T, command: string): T {
  try {
    return load(process.env);
  } catch (err) {
    // Read by an operator at a terminal, before any logger exists: the same text as the gateway's.
    if (err instanceof ConfigError) {
      process.stderr.write(`${command}: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}

/** `server.js migrate`: builds the indexes and runs the data migrations of MONGO_URL's database, then exits. */
async function migrate(): Promise<void> {
  process.exit(await migrateCommand('pets', readConfig(loadMigrationConfig, 'pets migrate'), PETS_MIGRATION));
}

async function main(): Promise<void> {
  const config: Config = readConfig(loadConfig, 'pets');
  const mongo = config.store.kind === 'mongo' ? new MongoClient(config.store.url, mongoClientOptions) : undefined;
  const mongoStore = mongo && config.store.kind === 'mongo' ? new MongoPetStore(mongo.db(config.store.db)) : undefined;
  // One asynchronous stdout for both listeners, flushed by serve() at shutdown.
  const logStream = logDestination();
  const registry = createRegistry('pets');
  const app = buildApp(config, { store: mongoStore ?? new MemoryPetStore(), registry, logStream });
  const metrics = await buildMetricsApp(registry, { serviceName: 'pets', logLevel: config.logLevel, logStream });
  if (mongo) {
    // onClose runs after in-flight requests finish, so the client closes last.
    app.addHook('onClose', async () => {
      await mongo.close();
    });
  }

  try {
    if (config.store.kind === 'mongo' && mongo && mongoStore) {
      const { url, db } = config.store;
      app.log.info({ store: 'mongodb', url: redactUrl(url), db }, 'PET STORE: MongoDB');
      // Only read here: the indexes are built by `npm run migrate`, not under the request timeouts.
      await mongo
        .connect()
        .then(() => requireIndexes('pets', mongo.db(db), PETS_INDEXES, { url, db }))
        .catch((err: unknown) => {
          throw mongoAtStart(err, url);
        });
    } else {
      app.log.warn(
        { store: 'memory' },
        'PET STORE: in-memory, every pet is lost on restart and replicas do not share pets; set MONGO_URL for MongoDB',
      );
    }
    await serve(
      [
        { app, host: config.host, port: config.port, hostVariable: 'HOST', portVariable: 'PORT' },
        {
          app: metrics,
          host: config.metricsHost,
          port: config.metricsPort,
          hostVariable: 'METRICS_HOST',
          portVariable: 'METRICS_PORT',
        },
      ],
      config.shutdownGraceMs,
    );
    // Forked by npm start (scripts/start.mjs) with an IPC channel: both listeners listen now.
    process.send?.({ ready: true });
  } catch (err) {
    // What the operator fixes in the environment is one line on stderr, as a bad configuration
    // is; anything else is a bug, logged with its stack.
    if (err instanceof StartupError) process.stderr.write(`pets: ${err.message}\n`);
    else app.log.fatal({ err }, 'pets service failed to start');
    // Closing flushes the log lines before it (the store's line among them).
    await app.close().catch(() => {});
    process.exit(1);
  }
}

await (process.argv[2] === 'migrate' ? migrate() : main());
