import { ConfigError } from '@animal-store/common/env.js';
import { describe, expect, it } from 'vitest';
import { loadConfig, loadMigrationConfig } from '../src/config.js';

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('defaults to 0.0.0.0:8090, metrics on 127.0.0.1:9465, info, 10 s grace and the in-memory store', () => {
    expect(loadConfig({})).toEqual({
      host: '0.0.0.0',
      port: 8090,
      metricsHost: '127.0.0.1',
      metricsPort: 9465,
      logLevel: 'info',
      shutdownGraceMs: 10_000,
      store: { kind: 'memory' },
      overload: { maxEventLoopDelayMs: 1000, maxHeapUsedBytes: expect.any(Number) },
    });
  });

  it('reads every variable', () => {
    expect(
      loadConfig({
        HOST: '127.0.0.1',
        PORT: '9000',
        METRICS_HOST: '0.0.0.0',
        METRICS_PORT: '9100',
        LOG_LEVEL: 'debug',
        SHUTDOWN_GRACE_MS: '2500',
        MONGO_URL: 'mongodb://db:27017',
        OVERLOAD_EVENT_LOOP_DELAY_MS: '250',
        OVERLOAD_HEAP_USED_MB: '512',
      }),
    ).toEqual({
      host: '127.0.0.1',
      port: 9000,
      metricsHost: '0.0.0.0',
      metricsPort: 9100,
      logLevel: 'debug',
      shutdownGraceMs: 2500,
      store: { kind: 'mongo', url: 'mongodb://db:27017', db: 'pets' },
      overload: { maxEventLoopDelayMs: 250, maxHeapUsedBytes: 512 * 1024 * 1024 },
    });
  });

  it('treats empty values as unset', () => {
    expect(loadConfig({ PORT: '', MONGO_URL: '  ' })).toMatchObject({ port: 8090, store: { kind: 'memory' } });
  });

  it.each(['abc', '70000', '-1', '80.5', '8o8o'])('refuses PORT=%s', (port) => {
    expect(problemsOf({ PORT: port }).join()).toMatch(/^PORT must be an integer from 0 to 65535/);
  });

  it('refuses an unknown LOG_LEVEL and a bad SHUTDOWN_GRACE_MS', () => {
    expect(problemsOf({ LOG_LEVEL: 'loud' }).join()).toContain('LOG_LEVEL');
    expect(problemsOf({ SHUTDOWN_GRACE_MS: 'soon' }).join()).toContain('SHUTDOWN_GRACE_MS');
  });

  it('refuses to run in production without MONGO_URL', () => {
    expect(problemsOf({ NODE_ENV: 'production' }).join()).toContain('MONGO_URL is required when NODE_ENV=production');
  });

  it("keeps pets in the database MONGO_URL's path names, `pets` when it names none", () => {
    const store = (url: string) => loadConfig({ MONGO_URL: url }).store;
    expect(store('mongodb://u:p@h1:27017,h2:27017/staging-pets?replicaSet=rs0&authSource=admin')).toMatchObject({
      db: 'staging-pets',
    });
    expect(store('mongodb+srv://cluster.example.net/animal%2Dstore')).toMatchObject({ db: 'animal-store' });
    expect(store('mongodb://h:27017/')).toMatchObject({ db: 'pets' });
    expect(store('mongodb://h:27017/?replicaSet=rs0')).toMatchObject({ db: 'pets' });
    expect(problemsOf({ MONGO_URL: 'mongodb://h:27017/a.b' })).toEqual([
      'MONGO_URL names a database MongoDB refuses: use 1 to 63 characters without / \\ . " $ or spaces, or name none for "pets"',
    ]);
  });

  it('reads only MONGO_URL to migrate, and requires it', () => {
    expect(loadMigrationConfig({ MONGO_URL: 'mongodb://h/p1', PORT: 'not a port' })).toEqual({
      url: 'mongodb://h/p1',
      db: 'p1',
    });
    expect(() => loadMigrationConfig({})).toThrow(
      'MONGO_URL is required to migrate: the MongoDB whose indexes and data it brings up to date',
    );
  });

  it('runs in production with MONGO_URL, including a replica-set URL with several hosts', () => {
    const url = 'mongodb://user:secret@h1:27017,h2:27017/?replicaSet=rs0';
    expect(loadConfig({ NODE_ENV: 'production', MONGO_URL: url }).store).toEqual({ kind: 'mongo', url, db: 'pets' });
    expect(loadConfig({ MONGO_URL: 'mongodb+srv://cluster.example.net' }).store.kind).toBe('mongo');
  });

  it('refuses a MONGO_URL that is not mongodb:// or mongodb+srv://', () => {
    expect(problemsOf({ MONGO_URL: 'http://db:27017' }).join()).toContain(
      'MONGO_URL="http://db:27017" must start with mongodb:// or mongodb+srv://: write mongodb://db:27017',
    );
  });

  it('reports every problem at once', () => {
    expect(problemsOf({ NODE_ENV: 'production', PORT: 'x', LOG_LEVEL: 'y' })).toHaveLength(3);
  });
});
