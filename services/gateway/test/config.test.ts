import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@animal-store/common/env.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { startGateway } from './helpers.js';

/** The ConfigError loadConfig throws for `env`; fails the test when it does not throw one. */
function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe('loadConfig defaults', () => {
  it('runs embedded on the documented defaults with an empty environment', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      production: false,
      host: '0.0.0.0',
      port: 8080,
      adminHost: '127.0.0.1',
      adminPort: 8081,
      adminToken: undefined,
      petsUrl: 'http://127.0.0.1:8090',
      redisUrl: undefined,
      mongoUrl: undefined,
      trustProxy: false,
      failureMode: 'open',
      ban: { threshold: 10, windowMs: 60_000, durationMs: 900_000 },
      anonPerMinute: 60,
      apiKeysFile: undefined,
      logLevel: 'info',
    });
  });

  it('reads every documented variable', () => {
    const config = loadConfig({
      HOST: '127.0.0.1',
      PORT: '9000',
      ADMIN_HOST: '0.0.0.0',
      ADMIN_PORT: '9001',
      ADMIN_TOKEN: 'a-long-enough-admin-token',
      PETS_URL: 'http://pets:8090',
      REDIS_URL: 'redis://redis:6379/0',
      MONGO_URL: 'mongodb://mongo:27017',
      RATE_LIMIT_FAILURE_MODE: 'closed',
      BAN_THRESHOLD: '3',
      BAN_WINDOW_SECONDS: '30',
      BAN_SECONDS: '120',
      ANON_PER_MINUTE: '10',
      API_KEYS_FILE: '/etc/gateway/keys.json',
    });
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 9000,
      adminHost: '0.0.0.0',
      adminPort: 9001,
      adminToken: 'a-long-enough-admin-token',
      petsUrl: 'http://pets:8090',
      redisUrl: 'redis://redis:6379/0',
      mongoUrl: 'mongodb://mongo:27017',
      failureMode: 'closed',
      ban: { threshold: 3, windowMs: 30_000, durationMs: 120_000 },
      anonPerMinute: 10,
      apiKeysFile: '/etc/gateway/keys.json',
    });
  });

  it('treats empty values as unset', () => {
    const config = loadConfig({ PORT: '', REDIS_URL: '', ADMIN_TOKEN: '', RATE_LIMIT_FAILURE_MODE: '' });
    expect(config.port).toBe(8080);
    expect(config.redisUrl).toBeUndefined();
    expect(config.adminToken).toBeUndefined();
    expect(config.failureMode).toBe('open');
  });
});

describe('loadConfig in production', () => {
  it('refuses to start without REDIS_URL and MONGO_URL, naming both', () => {
    const err = configError({ NODE_ENV: 'production' });
    expect(err.problems).toHaveLength(2);
    expect(err.problems.some((p) => p.includes('REDIS_URL'))).toBe(true);
    expect(err.problems.some((p) => p.includes('MONGO_URL'))).toBe(true);
    expect(err.message).toContain('REDIS_URL');
    expect(err.message).toContain('MONGO_URL');
  });

  it('refuses REDIS_URL alone, and MONGO_URL alone', () => {
    expect(configError({ NODE_ENV: 'production', REDIS_URL: 'redis://r:6379' }).problems).toEqual([
      expect.stringContaining('MONGO_URL'),
    ]);
    expect(configError({ NODE_ENV: 'production', MONGO_URL: 'mongodb://m:27017' }).problems).toEqual([
      expect.stringContaining('REDIS_URL'),
    ]);
  });

  it('starts with Redis and MongoDB, and refuses an API_KEYS_FILE in place of MongoDB', () => {
    expect(
      loadConfig({ NODE_ENV: 'production', REDIS_URL: 'redis://r:6379', MONGO_URL: 'mongodb://m:27017' }),
    ).toMatchObject({ production: true });
    // Keys made through the admin API would live in one replica's memory and vanish on restart.
    expect(() =>
      loadConfig({ NODE_ENV: 'production', REDIS_URL: 'redis://r:6379', API_KEYS_FILE: '/keys.json' }),
    ).toThrow(/MONGO_URL is required/);
  });
});

describe('loadConfig problems', () => {
  it('reports every problem in one error', () => {
    const err = configError({
      PORT: '80a',
      RATE_LIMIT_FAILURE_MODE: 'sometimes',
      REDIS_URL: 'http://redis:6379',
      MONGO_URL: 'postgres://db',
      BAN_THRESHOLD: '0',
    });
    expect(err.problems).toHaveLength(5);
    for (const name of ['PORT', 'RATE_LIMIT_FAILURE_MODE', 'REDIS_URL', 'MONGO_URL', 'BAN_THRESHOLD']) {
      expect(
        err.problems.filter((p) => p.startsWith(name)),
        name,
      ).toHaveLength(1);
      expect(err.message).toContain(name);
    }
  });

  it.each([['-1'], ['65536'], ['http'], ['8080.5'], ['1e3']])('refuses PORT=%s', (port) => {
    expect(configError({ PORT: port }).problems).toEqual([expect.stringMatching(/^PORT must be an integer/)]);
  });

  it('refuses a REDIS_URL that is not a URL or not redis:/rediss:', () => {
    expect(configError({ REDIS_URL: 'not a url' }).problems).toEqual([expect.stringContaining('REDIS_URL')]);
    expect(configError({ REDIS_URL: 'http://redis:6379' }).problems).toEqual([expect.stringContaining('redis:')]);
    expect(loadConfig({ REDIS_URL: 'rediss://user:pw@redis:6380/1' }).redisUrl).toBe('rediss://user:pw@redis:6380/1');
  });

  it('refuses a PETS_URL that is not http(s)', () => {
    expect(configError({ PETS_URL: 'ftp://pets' }).problems).toEqual([expect.stringContaining('PETS_URL')]);
  });

  it('refuses an ADMIN_TOKEN shorter than 16 characters and accepts 16', () => {
    expect(configError({ ADMIN_TOKEN: 'x'.repeat(15) }).problems).toEqual([expect.stringContaining('ADMIN_TOKEN')]);
    expect(loadConfig({ ADMIN_TOKEN: 'x'.repeat(16) }).adminToken).toBe('x'.repeat(16));
  });
});

describe('ADMIN_TOKEN_FILE', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-config-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads the token from the file, trimming the trailing newline', async () => {
    const path = join(dir, 'token');
    await writeFile(path, 'token-from-a-secret-file\n');
    expect(loadConfig({ ADMIN_TOKEN_FILE: path }).adminToken).toBe('token-from-a-secret-file');
  });

  it('prefers ADMIN_TOKEN when both are set', async () => {
    const path = join(dir, 'token2');
    await writeFile(path, 'token-from-a-secret-file\n');
    expect(loadConfig({ ADMIN_TOKEN: 'token-from-the-environment', ADMIN_TOKEN_FILE: path }).adminToken).toBe(
      'token-from-the-environment',
    );
  });

  it('applies the length rule to a token read from a file', async () => {
    const path = join(dir, 'short');
    await writeFile(path, 'short\n');
    expect(configError({ ADMIN_TOKEN_FILE: path }).problems).toEqual([expect.stringContaining('at least 16')]);
  });

  it('leaves the admin API off for an empty file', async () => {
    const path = join(dir, 'empty');
    await writeFile(path, '\n');
    expect(loadConfig({ ADMIN_TOKEN_FILE: path }).adminToken).toBeUndefined();
  });

  it('reports a file that cannot be read', () => {
    const missing = join(dir, 'missing');
    expect(configError({ ADMIN_TOKEN_FILE: missing }).problems).toEqual([expect.stringContaining('ADMIN_TOKEN_FILE')]);
  });
});

describe('TRUST_PROXY', () => {
  it('is off by default and reads true/false', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'true' }).trustProxy).toBe(true);
    expect(loadConfig({ TRUST_PROXY: 'false' }).trustProxy).toBe(false);
  });

  it('reads a hop count as a number', () => {
    expect(loadConfig({ TRUST_PROXY: '2' }).trustProxy).toBe(2);
  });

  it('reads a list of addresses and CIDRs', () => {
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8,127.0.0.1' }).trustProxy).toEqual(['10.0.0.0/8', '127.0.0.1']);
    expect(loadConfig({ TRUST_PROXY: ' 10.0.0.0/8 , ::1, loopback ' }).trustProxy).toEqual([
      '10.0.0.0/8',
      '::1',
      'loopback',
    ]);
  });

  it('refuses garbage, naming the bad entry', () => {
    const err = configError({ TRUST_PROXY: '10.0.0.0/8,proxy.example.com' });
    expect(err.problems).toEqual([expect.stringContaining('proxy.example.com')]);
    expect(configError({ TRUST_PROXY: 'yes' }).problems).toEqual([expect.stringContaining('TRUST_PROXY')]);
  });

  it.each([['abc'], ['cafe::zz'], ['999.1.1.1'], ['10.0.0.0/33'], ['::1/129'], ['10.0.0.0/8/8'], ['10.0.0.0/']])(
    'refuses %s, which would otherwise crash the server at start',
    (entry) => {
      expect(configError({ TRUST_PROXY: `127.0.0.1,${entry}` }).problems).toEqual([expect.stringContaining(entry)]);
    },
  );

  it.each([
    ['true'],
    ['2'],
    ['10.0.0.0/8,127.0.0.1'],
    ['::1,fd00::/8,loopback,linklocal,uniquelocal'],
    ['::ffff:10.0.0.0/104'],
  ])('starts a gateway with TRUST_PROXY=%s', async (value) => {
    const gw = await startGateway({ env: { TRUST_PROXY: value } });
    try {
      expect((await gw.app.inject({ url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await gw.close();
    }
  });
});
