import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@animal-store/common/env.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, loadMigrationConfig } from '../src/config.js';
import { startGateway } from './support/helpers.js';

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
      metricsHost: '127.0.0.1',
      metricsPort: 9464,
      petsUrl: 'http://127.0.0.1:8090',
      redis: undefined,
      mongoUrl: undefined,
      keysIn: 'memory',
      trustProxy: false,
      failureMode: 'open',
      ban: { threshold: 50, windowMs: 60_000, durationMs: 900_000, graceMs: 500, minRetryAfterMs: 8_000 },
      anonPerMinute: 60,
      apiKeysFile: undefined,
      logLevel: 'info',
    });
  });

  it('reads every documented variable', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'config-'));
    const keysFile = join(dir, 'keys.json');
    const sha256 = 'a'.repeat(64);
    await writeFile(keysFile, JSON.stringify([{ id: 'key_file', plan: 'pro', sha256 }]));
    const config = loadConfig({
      HOST: '127.0.0.1',
      PORT: '9000',
      ADMIN_HOST: '0.0.0.0',
      ADMIN_PORT: '9001',
      ADMIN_TOKEN: 'a-long-enough-admin-token',
      METRICS_HOST: '0.0.0.0',
      METRICS_PORT: '9100',
      PETS_URL: 'http://pets:8090',
      REDIS_URL: 'redis://redis:6379/0',
      MONGO_URL: 'mongodb://mongo:27017',
      RATE_LIMIT_FAILURE_MODE: 'closed',
      BAN_THRESHOLD: '3',
      BAN_WINDOW_SECONDS: '30',
      BAN_SECONDS: '120',
      BAN_GRACE_MS: '250',
      RETRY_AFTER_MIN_SECONDS: '5',
      ANON_PER_MINUTE: '10',
      API_KEYS_FILE: keysFile,
    });
    await rm(dir, { recursive: true, force: true });
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 9000,
      adminHost: '0.0.0.0',
      adminPort: 9001,
      adminToken: 'a-long-enough-admin-token',
      metricsHost: '0.0.0.0',
      metricsPort: 9100,
      petsUrl: 'http://pets:8090',
      redis: { mode: 'standalone', url: 'redis://redis:6379/0' },
      mongoUrl: 'mongodb://mongo:27017',
      keysIn: 'mongo',
      failureMode: 'closed',
      ban: { threshold: 3, windowMs: 30_000, durationMs: 120_000, graceMs: 250, minRetryAfterMs: 5_000 },
      anonPerMinute: 10,
      apiKeysFile: keysFile,
      apiKeys: [{ id: 'key_file', name: 'key_file', plan: 'pro', sha256 }],
      apiKeyCustomers: [],
    });
  });

  it("keeps keys and customers in the database MONGO_URL's path names, `gateway` when it names none", () => {
    expect(loadConfig({ MONGO_URL: 'mongodb://u:p@h1,h2/gateway-staging?replicaSet=rs0' }).mongoDb).toBe(
      'gateway-staging',
    );
    expect(loadConfig({ MONGO_URL: 'mongodb://h:27017' }).mongoDb).toBe('gateway');
    expect(loadConfig({ MONGO_URL: 'mongodb://h:27017/?tls=true' }).mongoDb).toBe('gateway');
    expect(loadConfig({}).mongoDb).toBe('gateway');
    expect(() => loadConfig({ MONGO_URL: 'mongodb://h/has space' })).toThrow(
      'MONGO_URL names a database MongoDB refuses',
    );
    expect(loadMigrationConfig({ MONGO_URL: 'mongodb://h/g1' })).toEqual({ url: 'mongodb://h/g1', db: 'g1' });
  });

  it('keeps keys and customers in MongoDB when it is set, else in the Redis of the limits, else in memory', () => {
    expect(loadConfig({ REDIS_URL: 'redis://redis:6379' }).keysIn).toBe('redis');
    expect(loadConfig({ REDIS_CLUSTER_NODES: 'a:7000,b:7001' }).keysIn).toBe('redis');
    expect(loadConfig({ REDIS_URL: 'redis://redis:6379', MONGO_URL: 'mongodb://mongo:27017' }).keysIn).toBe('mongo');
    expect(loadConfig({ MONGO_URL: 'mongodb://mongo:27017' }).keysIn).toBe('mongo');
  });

  it('treats empty values as unset', () => {
    const config = loadConfig({ PORT: '', REDIS_URL: '', ADMIN_TOKEN: '', RATE_LIMIT_FAILURE_MODE: '' });
    expect(config.port).toBe(8080);
    expect(config.redis).toBeUndefined();
    expect(config.adminToken).toBeUndefined();
    expect(config.failureMode).toBe('open');
  });
});

describe('the portal’s session and address limits', () => {
  it('reads PORTAL_SESSION_IDLE_MS, PORTAL_PER_MINUTE and PORTAL_SIGN_IN_PER_MINUTE, with their defaults', () => {
    expect(loadConfig({})).toMatchObject({
      portalSessionIdleMs: 900_000,
      portalPerMinute: 300,
      portalSignInPerMinute: 20,
    });
    const set = { PORTAL_SESSION_IDLE_MS: '120000', PORTAL_PER_MINUTE: '50', PORTAL_SIGN_IN_PER_MINUTE: '3' };
    expect(loadConfig(set)).toMatchObject({
      portalSessionIdleMs: 120_000,
      portalPerMinute: 50,
      portalSignInPerMinute: 3,
    });
  });

  it('refuses an idle time under a minute or over the session’s hour', () => {
    expect(() => loadConfig({ PORTAL_SESSION_IDLE_MS: '59999' })).toThrow(/PORTAL_SESSION_IDLE_MS/);
    expect(() => loadConfig({ PORTAL_SESSION_IDLE_MS: '3600001' })).toThrow(/PORTAL_SESSION_IDLE_MS/);
    expect(() => loadConfig({ PORTAL_SIGN_IN_PER_MINUTE: '0' })).toThrow(/PORTAL_SIGN_IN_PER_MINUTE/);
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

  it.each([
    [{ BAN_GRACE_MS: '8000' }, 'BAN_GRACE_MS (8000) must be less than RETRY_AFTER_MIN_SECONDS in milliseconds (8000)'],
    [
      { BAN_GRACE_MS: '5000', BAN_WINDOW_SECONDS: '5', RETRY_AFTER_MIN_SECONDS: '0' },
      'BAN_GRACE_MS (5000) must be less than BAN_WINDOW_SECONDS in milliseconds (5000)',
    ],
  ])('refuses a ban grace under which no refusal would count (%o)', (env, problem) => {
    expect(configError(env).problems).toEqual([problem]);
    expect(() => loadConfig({ ...env, RETRY_AFTER_MIN_SECONDS: '0', BAN_WINDOW_SECONDS: '60' })).not.toThrow();
  });

  it.each([['-1'], ['65536'], ['http'], ['8080.5'], ['1e3']])('refuses PORT=%s', (port) => {
    expect(configError({ PORT: port }).problems).toEqual([expect.stringMatching(/^PORT must be an integer/)]);
  });

  it('refuses a REDIS_URL that is not a URL or not redis:/rediss:', () => {
    expect(configError({ REDIS_URL: 'not a url' }).problems).toEqual([expect.stringContaining('REDIS_URL')]);
    expect(configError({ REDIS_URL: 'http://redis:6379' }).problems).toEqual([expect.stringContaining('redis:')]);
    expect(loadConfig({ REDIS_URL: 'rediss://user:pw@redis:6380/1' }).redis).toEqual({
      mode: 'standalone',
      url: 'rediss://user:pw@redis:6380/1',
    });
  });

  it('keeps the usage history 63 days and credit ledgers 400 by default; a ledger never shorter than the history’s two periods', () => {
    const config = loadConfig({});
    expect(config.usageHistoryMs).toBe(63 * 86_400_000);
    expect(config.creditsLedgerMs).toBe(400 * 86_400_000);
    expect(loadConfig({ CREDITS_LEDGER_DAYS: '63' }).creditsLedgerMs).toBe(63 * 86_400_000);
    expect(configError({ CREDITS_LEDGER_DAYS: '62', PORT: 'x' }).problems).toEqual([
      expect.stringMatching(/^PORT must be an integer/),
      expect.stringMatching(/^CREDITS_LEDGER_DAYS must be an integer from 63 to 3650/),
    ]);
  });

  it('refuses a PETS_URL that is not http(s)', () => {
    expect(configError({ PETS_URL: 'ftp://pets' }).problems).toEqual([expect.stringContaining('PETS_URL')]);
  });

  it('refuses an ADMIN_TOKEN shorter than 16 characters and accepts 16', () => {
    expect(configError({ ADMIN_TOKEN: 'x'.repeat(15) }).problems).toEqual([expect.stringContaining('ADMIN_TOKEN')]);
    expect(loadConfig({ ADMIN_TOKEN: 'x'.repeat(16) }).adminToken).toBe('x'.repeat(16));
  });
});

describe('Redis deployment: standalone, Sentinel or Cluster', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-redis-config-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads Sentinel: the sentinels, the master name (default mymaster), credentials and TLS', () => {
    expect(loadConfig({ REDIS_SENTINELS: 's1:26379, s2:26380,[::1]:26381' }).redis).toEqual({
      mode: 'sentinel',
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26380 },
        { host: '::1', port: 26381 },
      ],
      masterName: 'mymaster',
      auth: { username: undefined, password: undefined, tls: false },
    });
    expect(
      loadConfig({
        REDIS_SENTINELS: 's1:26379',
        REDIS_SENTINEL_MASTER: 'limits',
        REDIS_USERNAME: 'gateway',
        REDIS_PASSWORD: 'pw',
        REDIS_TLS: 'true',
      }).redis,
    ).toMatchObject({ masterName: 'limits', auth: { username: 'gateway', password: 'pw', tls: true } });
  });

  it('reads Cluster seed nodes, with the password from REDIS_PASSWORD_FILE', async () => {
    const path = join(dir, 'redis-password');
    await writeFile(path, 'from-a-secret\n');
    expect(loadConfig({ REDIS_CLUSTER_NODES: 'c1:6379,c2:6379', REDIS_PASSWORD_FILE: path }).redis).toEqual({
      mode: 'cluster',
      nodes: [
        { host: 'c1', port: 6379 },
        { host: 'c2', port: 6379 },
      ],
      auth: { username: undefined, password: 'from-a-secret', tls: false },
    });
  });

  it('refuses more than one mode, naming the variables set', () => {
    const err = configError({ REDIS_URL: 'redis://r:6379', REDIS_CLUSTER_NODES: 'c1:6379' });
    expect(err.problems).toEqual([expect.stringContaining('not REDIS_URL and REDIS_CLUSTER_NODES')]);
    expect(configError({ REDIS_SENTINELS: 's:26379', REDIS_CLUSTER_NODES: 'c:6379' }).problems).toHaveLength(1);
  });

  it.each([['c1'], ['c1:0'], ['c1:70000'], ['c1:6379,'], ['redis://c1:6379']])(
    'refuses REDIS_CLUSTER_NODES=%s',
    (nodes) => {
      expect(configError({ REDIS_CLUSTER_NODES: nodes }).problems).toEqual([
        expect.stringMatching(/^REDIS_CLUSTER_NODES must be comma-separated host:port/),
      ]);
    },
  );

  it('refuses settings of a mode not in use (credentials belong in a REDIS_URL), an unreadable password file and a REDIS_TLS that is not true/false', () => {
    expect(configError({ REDIS_URL: 'redis://r:6379', REDIS_PASSWORD: 'pw' }).problems).toEqual([
      expect.stringContaining('REDIS_PASSWORD is not used with REDIS_URL: put credentials in the URL'),
    ]);
    // Settings of a mode not in use would be ignored without a word.
    expect(configError({ REDIS_SENTINEL_MASTER: 'limits', REDIS_TLS: 'true' }).problems).toEqual([
      expect.stringContaining(
        'REDIS_TLS, REDIS_SENTINEL_MASTER are set, but none of REDIS_URL, REDIS_SENTINELS, REDIS_CLUSTER_NODES',
      ),
    ]);
    expect(configError({ REDIS_CLUSTER_NODES: 'c:6379', REDIS_SENTINEL_MASTER: 'limits' }).problems).toEqual([
      'REDIS_SENTINEL_MASTER is not used with REDIS_CLUSTER_NODES',
    ]);
    expect(configError({ REDIS_CLUSTER_NODES: 'c:6379', REDIS_PASSWORD_FILE: join(dir, 'missing') }).problems).toEqual([
      expect.stringContaining('REDIS_PASSWORD_FILE'),
    ]);
    expect(configError({ REDIS_SENTINELS: 's:26379', REDIS_TLS: 'yes' }).problems).toEqual([
      expect.stringMatching(/^REDIS_TLS must be one of true, false/),
    ]);
  });

  it('accepts any of the three modes in production, and names all three when none is set', () => {
    const base = { NODE_ENV: 'production', MONGO_URL: 'mongodb://m:27017' };
    expect(loadConfig({ ...base, REDIS_SENTINELS: 's:26379' }).redis?.mode).toBe('sentinel');
    expect(loadConfig({ ...base, REDIS_CLUSTER_NODES: 'c:6379' }).redis?.mode).toBe('cluster');
    expect(configError(base).problems).toEqual([
      expect.stringContaining('REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES is required'),
    ]);
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

  it.each([['0.0.0.0/0'], ['::/0'], ['::ffff:0.0.0.0/0'], ['10.0.0.0/00']])(
    'refuses %s, a zero prefix, saying TRUST_PROXY=true trusts every address',
    (entry) => {
      expect(configError({ TRUST_PROXY: `127.0.0.1,${entry}` }).problems).toEqual([
        `TRUST_PROXY entry "${entry}" trusts every address: set TRUST_PROXY=true for that, or name your proxies' addresses`,
      ]);
    },
  );

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

describe('the public API document settings', () => {
  it('defaults to the gateway’s own /v1, a named contact and a proprietary license', () => {
    expect(loadConfig({}).apiDocument).toEqual({
      productionUrl: undefined,
      stagingUrl: undefined,
      contact: { name: 'Animal store API support' },
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
    });
  });

  it('reads both deployments, the contact and the license', () => {
    const config = loadConfig({
      PUBLIC_BASE_URL: 'https://api.animal-store.test/v1',
      STAGING_BASE_URL: 'https://staging.animal-store.test/store/v1',
      API_CONTACT_NAME: 'Store API team',
      API_CONTACT_EMAIL: 'api@animal-store.test',
      API_CONTACT_URL: 'https://animal-store.test/support',
      API_LICENSE_NAME: 'Animal store terms',
      API_LICENSE_URL: 'https://animal-store.test/terms',
    });
    expect(config.apiDocument).toEqual({
      productionUrl: 'https://api.animal-store.test/v1',
      stagingUrl: 'https://staging.animal-store.test/store/v1',
      contact: { name: 'Store API team', email: 'api@animal-store.test', url: 'https://animal-store.test/support' },
      license: { name: 'Animal store terms', url: 'https://animal-store.test/terms' },
    });
  });

  it('takes an SPDX identifier instead of a URL, and refuses a license name with neither or both', () => {
    expect(loadConfig({ API_LICENSE_NAME: 'MIT', API_LICENSE_IDENTIFIER: 'MIT' }).apiDocument.license).toEqual({
      name: 'MIT',
      identifier: 'MIT',
    });
    expect(configError({ API_LICENSE_NAME: 'MIT' }).problems).toEqual([
      expect.stringContaining('API_LICENSE_NAME needs API_LICENSE_URL or API_LICENSE_IDENTIFIER'),
    ]);
    expect(
      configError({ API_LICENSE_URL: 'https://animal-store.test/terms', API_LICENSE_IDENTIFIER: 'MIT' }).problems,
    ).toEqual(['set API_LICENSE_URL or API_LICENSE_IDENTIFIER, not both']);
  });

  it.each([
    ['https://api.animal-store.test'],
    ['https://api.animal-store.test/v1/'],
    ['https://api.animal-store.test/v2'],
    ['https://api.animal-store.test/v1?x=1'],
    ['/v1'],
    ['ftp://api.animal-store.test/v1'],
  ])('refuses the base address %s, and reports every bad setting at once', (url) => {
    const problems = configError({
      PUBLIC_BASE_URL: url,
      STAGING_BASE_URL: url,
      API_CONTACT_EMAIL: 'support',
    }).problems;
    expect(problems).toEqual([
      expect.stringContaining('API_CONTACT_EMAIL'),
      expect.stringContaining('PUBLIC_BASE_URL'),
      expect.stringContaining('STAGING_BASE_URL'),
    ]);
  });
});

describe('CORS_ORIGINS', () => {
  it('is off by default and reads comma-separated origins', () => {
    expect(loadConfig({}).corsOrigins).toEqual([]);
    expect(loadConfig({ CORS_ORIGINS: 'https://app.animal-store.test, http://localhost:5173' }).corsOrigins).toEqual([
      'https://app.animal-store.test',
      'http://localhost:5173',
    ]);
  });

  it('refuses every entry a browser would never send as its Origin, naming each', () => {
    const bad = [
      '*',
      'app.animal-store.test',
      'https://app.animal-store.test/',
      'https://a.test/path',
      'HTTPS://A.TEST',
      'ftp://a.test',
    ];
    expect(configError({ CORS_ORIGINS: ['https://ok.test', ...bad].join(',') }).problems).toEqual(
      bad.map((entry) => expect.stringContaining(`"${entry}"`)),
    );
  });
});

describe('loadConfig metering', () => {
  it('closes an hour 5 minutes after it ends and names Stripe meter events api_units unless told otherwise', () => {
    expect(loadConfig({}).metering).toEqual({ closeDelayMs: 300_000, stripeEventName: 'api_units' });
    expect(loadConfig({ METERING_CLOSE_DELAY_MS: '60000', METERING_STRIPE_EVENT_NAME: 'pets.calls' }).metering).toEqual(
      { closeDelayMs: 60_000, stripeEventName: 'pets.calls' },
    );
  });

  it('lists every metering problem: a delay that is no number, or shorter than an answer can take, and a bad event name', () => {
    const problems = configError({
      METERING_CLOSE_DELAY_MS: 'soon',
      METERING_STRIPE_EVENT_NAME: 'api units!',
    }).problems;
    expect(problems).toEqual([
      expect.stringContaining('METERING_CLOSE_DELAY_MS'),
      expect.stringContaining('METERING_STRIPE_EVENT_NAME'),
    ]);
    // Unset, it follows a long upstream timeout instead.
    expect(loadConfig({ UPSTREAM_TIMEOUT_MS: '600000' }).metering.closeDelayMs).toBe(602_000);
    expect(configError({ METERING_CLOSE_DELAY_MS: '5000', UPSTREAM_TIMEOUT_MS: '10000' }).problems).toEqual([
      'METERING_CLOSE_DELAY_MS (5000) must be at least UPSTREAM_TIMEOUT_MS + 2000 (12000): an hour closes only once its last answers are counted',
    ]);
  });
});

describe('regions (NATS_URL, REGION_*)', () => {
  it('is one region with NATS_URL unset, and reads REGION and the REGION_* settings with it', () => {
    expect(loadConfig({}).regions).toBeUndefined();
    expect(loadConfig({ NATS_URL: 'nats://nats:4222', REGION: 'eu-west' }).regions).toEqual({
      region: 'eu-west',
      natsUrl: 'nats://nats:4222',
      syncMs: 250,
      staleMs: 750,
      share: null,
    });
    const set = { NATS_URL: 'tls://n:4222', REGION: 'us', REGION_SYNC_MS: '100', REGION_STALE_MS: '1000' };
    expect(loadConfig({ ...set, REGION_SHARE: '0.4' }).regions).toMatchObject({
      syncMs: 100,
      staleMs: 1000,
      share: 0.4,
    });
  });

  it('lists every problem: no REGION, a REGION that is no subject token, a stale time within one interval, a share out of range', () => {
    expect(configError({ NATS_URL: 'nats://n:4222' }).message).toMatch(/REGION is required with NATS_URL/);
    const error = configError({
      NATS_URL: 'nats://n:4222',
      REGION: 'eu.west',
      REGION_SYNC_MS: '500',
      REGION_STALE_MS: '500',
      REGION_SHARE: '1.5',
    });
    expect(error.message).toMatch(/REGION must be 1 to 32 letters/);
    expect(error.message).toMatch(/REGION_STALE_MS \(500\) must be more than REGION_SYNC_MS \(500\)/);
    expect(error.message).toMatch(/REGION_SHARE must be a fraction/);
    expect(configError({ NATS_URL: 'redis://n:4222', REGION: 'eu' }).message).toMatch(/NATS_URL/);
  });

  it('refuses REGION_* settings without NATS_URL, which would do nothing', () => {
    expect(configError({ REGION: 'eu', REGION_SYNC_MS: '100' }).message).toMatch(
      /REGION, REGION_SYNC_MS set, but not NATS_URL/,
    );
  });
});
