import {
  type Env,
  EnvReader,
  LOG_LEVELS,
  type LogLevel,
  loadMongoTarget,
  type MongoTarget,
} from '@animal-store/common/env.js';
import { type OverloadConfig, readOverloadConfig } from '@animal-store/common/overload.js';

/** MongoDB's database is the one MONGO_URL's path names, else `pets`. */
type StoreConfig = { kind: 'memory' } | { kind: 'mongo'; url: string; db: string };

export interface Config {
  host: string;
  port: number;
  /** The only listener serving GET /metrics; loopback unless the deployment opens it. */
  metricsHost: string;
  metricsPort: number;
  logLevel: LogLevel;
  shutdownGraceMs: number;
  store: StoreConfig;
  /** Load-shedding thresholds (503 overloaded beyond them). */
  overload: OverloadConfig;
}

/** `server.js migrate`'s environment: MONGO_URL and the database it names (default `pets`). */
export const loadMigrationConfig = (env: Env): MongoTarget => loadMongoTarget(env, 'pets');

/** Reads and checks the whole environment once, reporting every problem together. */
export function loadConfig(env: Env): Config {
  const read = new EnvReader(env);
  const production = read.string('NODE_ENV') === 'production';
  const mongoUrl = read.url('MONGO_URL', ['mongodb:', 'mongodb+srv:']);
  read.require(
    !production || mongoUrl !== undefined,
    'MONGO_URL is required when NODE_ENV=production (the in-memory store loses every pet on restart)',
  );
  const config: Config = {
    host: read.host('HOST', '0.0.0.0'),
    port: read.int('PORT', 8090, 0, 65_535),
    metricsHost: read.host('METRICS_HOST', '127.0.0.1'),
    metricsPort: read.int('METRICS_PORT', 9465, 0, 65_535),
    logLevel: read.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
    shutdownGraceMs: read.int('SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    store:
      mongoUrl === undefined
        ? { kind: 'memory' }
        : { kind: 'mongo', url: mongoUrl, db: read.mongoDatabase('MONGO_URL', mongoUrl, 'pets') },
    overload: readOverloadConfig(read),
  };
  read.distinctListeners([
    { portVariable: 'PORT', host: config.host, port: config.port },
    { portVariable: 'METRICS_PORT', host: config.metricsHost, port: config.metricsPort },
  ]);
  read.done();
  return config;
}
