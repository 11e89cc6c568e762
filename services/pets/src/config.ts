import { type Env, EnvReader } from '@animal-store/common/env.js';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export type StoreConfig = { kind: 'memory' } | { kind: 'mongo'; url: string };

export interface Config {
  host: string;
  port: number;
  logLevel: LogLevel;
  shutdownGraceMs: number;
  store: StoreConfig;
}

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
    host: read.string('HOST', '0.0.0.0'),
    port: read.int('PORT', 8090, 0, 65_535),
    logLevel: read.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
    shutdownGraceMs: read.int('SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    store: mongoUrl === undefined ? { kind: 'memory' } : { kind: 'mongo', url: mongoUrl },
  };
  read.done();
  return config;
}
