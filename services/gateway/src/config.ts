import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import {
  type Env,
  EnvReader,
  type ListenerSetting,
  LOG_LEVELS,
  loadMongoTarget,
  type MongoTarget,
} from '@animal-store/common/env.js';
import { type OverloadConfig, readOverloadConfig } from '@animal-store/common/overload.js';
import type { FastifyServerOptions } from 'fastify';
import { DEFAULT_LEDGER_RETENTION_MS } from './credits/credit-ledger.js';
import { type KeysFile, keysFileContents } from './keys/keys-file.js';
import type { FailureMode } from './limits/guarded-limiter.js';
import type { BanPolicy } from './limits/key-limiter.js';
import { DEFAULT_PLANS, type PlanBook } from './plans/plans.js';
import { parsePlansFile } from './plans/plans-file.js';
import type { HostPort, RedisTarget } from './redis/clients.js';
import { parseWebhooksConfig, type WebhooksConfig } from './webhooks/config.js';

export interface GatewayConfig {
  production: boolean;
  host: string;
  port: number;
  adminHost: string;
  adminPort: number;
  /** Admin API is off when no token is configured. */
  adminToken: string | undefined;
  /** The customers' portal: its own listener, on while the admin API is (portal/app.ts). */
  portalHost: string;
  portalPort: number;
  /** Where customers reach the portal (no trailing slash): the base of the sign-in links. */
  portalUrl: string;
  /** A portal session ends after this long without a request (and at its hour in any case). */
  portalSessionIdleMs: number;
  /** Requests a minute one address may make of the portal's listener (portal/address-limits.ts). */
  portalPerMinute: number;
  /** Sign-in link visits a minute one address may make, within portalPerMinute. */
  portalSignInPerMinute: number;
  /** `Server-Timing` on every answer of the public listener (SERVER_TIMING=1; observability/server-timing.ts). */
  serverTiming: boolean;
  /** The only listener serving GET /metrics; loopback unless the deployment opens it. */
  metricsHost: string;
  metricsPort: number;
  petsUrl: string;
  /** Standalone, Sentinel or Cluster; none runs embedded (limits per process). */
  redis: RedisTarget | undefined;
  mongoUrl: string | undefined;
  /** The keys' and customers' database: the one MONGO_URL's path names, else `gateway`. */
  mongoDb: string;
  /**
   * Where keys and customers live: MongoDB when MONGO_URL is set, else the Redis of the limits
   * (durable as the credit ledger beside them), else this process's memory (gone at a restart).
   */
  keysIn: 'mongo' | 'redis' | 'memory';
  trustProxy: FastifyServerOptions['trustProxy'];
  failureMode: FailureMode;
  ban: BanPolicy;
  anonPerMinute: number;
  apiKeysFile: string | undefined;
  /** API_KEYS_FILE's keys, read and checked at start with every other setting. */
  apiKeys: KeysFile['keys'];
  /** API_KEYS_FILE's customers (its `customers`), loaded in front of the customer store. */
  apiKeyCustomers: KeysFile['customers'];
  logLevel: string;
  /** Longest a client may take to send a whole request (headers and body); 408 after it. */
  requestTimeoutMs: number;
  /** Upper bound for the upstream to send response headers, and between body chunks. */
  upstreamTimeoutMs: number;
  /** No request waits on Redis longer than this. */
  redisCommandTimeoutMs: number;
  /**
   * No request waits longer than this for the key store to look up a key (or its customer) it has
   * not cached: 503 after it, while the lookup goes on and caches its answer for the next request.
   */
  keyLookupTimeoutMs: number;
  /** Prefix for every Redis key and channel the gateway uses, so deployments can share a Redis. */
  redisPrefix: string;
  keyCacheMax: number;
  keyCacheTtlMs: number;
  /** How long each key's hourly usage history is kept (USAGE_HISTORY_DAYS). */
  usageHistoryMs: number;
  /**
   * Where the decisions taken while Redis is away wait to be written into the usage history
   * (USAGE_SPOOL_DIR), so a replica's death keeps them; undefined: this process's memory.
   */
  usageSpoolDir: string | undefined;
  /**
   * How long a credit ledger keeps its entries (CREDITS_LEDGER_DAYS); older ones are carried into
   * its opening balance. At least two billing periods, so an invoice's credits line can be read.
   */
  creditsLedgerMs: number;
  revocationPollMs: number;
  shutdownGraceMs: number;
  /** Load-shedding thresholds (503 overloaded beyond them). */
  overload: OverloadConfig;
  /** What the public OpenAPI document says about where and from whom the API is served. */
  apiDocument: ApiDocumentConfig;
  /** Origins browser apps may call the public API from (CORS); empty: CORS off. */
  corsOrigins: string[];
  /** The plans in force and the route costs: PLANS_FILE, else the spec's four plans. */
  plans: PlanBook;
  /** WEBHOOKS_*: endpoint rules, quota thresholds, retries (webhooks/config.ts). */
  webhooks: WebhooksConfig;
  /** The metering export (metering/, docs/metering.md). */
  metering: MeteringConfig;
  /** Limits across regions over NATS JetStream (regions/, docs/regions.md); undefined: one region. */
  regions: RegionsConfig | undefined;
}

/** NATS_URL and the REGION_* settings (docs/regions.md). */
export interface RegionsConfig {
  /** REGION: this gateway's region, a NATS subject token. */
  region: string;
  natsUrl: string;
  /** REGION_SYNC_MS: how often this region publishes its counts. */
  syncMs: number;
  /** REGION_STALE_MS: a region not heard from for longer is partitioned from this one. */
  staleMs: number;
  /** REGION_SHARE: the share of a window enforced while partitioned; null: 1 / the regions seen. */
  share: number | null;
}

/**
 * NATS_URL and REGION_*: unset NATS_URL is one region (the REGION_* settings are then refused, as
 * settings that would do nothing). REGION is a subject token, so it cannot hold a dot or a space.
 */
function parseRegions(r: EnvReader): RegionsConfig | undefined {
  const natsUrl = r.url('NATS_URL', ['nats:', 'tls:']);
  const region = r.string('REGION');
  const names = ['REGION', 'REGION_SYNC_MS', 'REGION_STALE_MS', 'REGION_SHARE'];
  if (natsUrl === undefined) {
    const stray = names.filter((name) => r.string(name) !== undefined);
    r.require(stray.length === 0, `${stray.join(', ')} set, but not NATS_URL: regions share limits through NATS`);
    return undefined;
  }
  r.require(region !== undefined, 'REGION is required with NATS_URL (the name of this gateway’s region)');
  r.require(
    region === undefined || /^[A-Za-z0-9_-]{1,32}$/.test(region),
    `REGION must be 1 to 32 letters, digits, '_' or '-', got "${region}"`,
  );
  const syncMs = r.int('REGION_SYNC_MS', 250, 10, 60_000);
  const staleMs = r.int('REGION_STALE_MS', 3 * syncMs, 1, 600_000);
  r.require(
    staleMs > syncMs,
    `REGION_STALE_MS (${staleMs}) must be more than REGION_SYNC_MS (${syncMs}): a region is heard once per interval`,
  );
  const rawShare = r.string('REGION_SHARE');
  const share = rawShare === undefined ? null : Number(rawShare);
  r.require(
    share === null || (/^(0?\.\d+|1(\.0*)?)$/.test(rawShare ?? '') && share > 0 && share <= 1),
    `REGION_SHARE must be a fraction above 0 and at most 1 (0.5), got "${rawShare}"`,
  );
  return { region: region ?? '', natsUrl, syncMs, staleMs, share };
}

export interface MeteringConfig {
  /** METERING_CLOSE_DELAY_MS: an hour is closed (reported) this long after it ends. */
  closeDelayMs: number;
  /** METERING_STRIPE_EVENT_NAME: `event_name` of the Stripe view (the Stripe meter's own). */
  stripeEventName: string;
}

/**
 * METERING_*. The close delay must outlast an admitted request's answer (UPSTREAM_TIMEOUT_MS) and
 * the history's one-second write batches, or an hour would be reported before its last counts.
 */
function parseMetering(r: EnvReader, upstreamTimeoutMs: number): MeteringConfig {
  const least = upstreamTimeoutMs + 2_000;
  // Unset: 5 minutes, or longer with a longer upstream timeout; set, it must be long enough.
  const set = r.string('METERING_CLOSE_DELAY_MS') !== undefined;
  const closeDelayMs = r.int('METERING_CLOSE_DELAY_MS', Math.max(300_000, least), 0, 86_400_000);
  r.require(
    !set || closeDelayMs >= least,
    `METERING_CLOSE_DELAY_MS (${closeDelayMs}) must be at least UPSTREAM_TIMEOUT_MS + 2000 (${least}): an hour closes only once its last answers are counted`,
  );
  const stripeEventName = r.string('METERING_STRIPE_EVENT_NAME', 'api_units');
  r.require(
    /^[A-Za-z0-9_.-]{1,100}$/.test(stripeEventName),
    `METERING_STRIPE_EVENT_NAME must be 1 to 100 letters, digits, '_', '.' or '-' (a Stripe meter's event_name), got "${stripeEventName}"`,
  );
  return { closeDelayMs, stripeEventName };
}

/** PLANS_FILE (JSON, see plans-file.ts) and RATE_LIMIT_SHADOW; every problem in the file is listed. */
function parsePlans(r: EnvReader): PlanBook {
  const shadow = r.oneOf('RATE_LIMIT_SHADOW', ['true', 'false'] as const, 'false') === 'true';
  const file = r.string('PLANS_FILE');
  if (file === undefined) return { ...DEFAULT_PLANS, shadow };
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    r.problems.push(`PLANS_FILE=${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    return { ...DEFAULT_PLANS, shadow };
  }
  const parsed = parsePlansFile(text, `PLANS_FILE=${file}`, shadow);
  if (Array.isArray(parsed)) {
    r.problems.push(...parsed);
    return { ...DEFAULT_PLANS, shadow };
  }
  return parsed;
}

/** API_KEYS_FILE (JSON, see keys/keys-file.ts): its keys and customers, every problem in the file listed. */
function parseApiKeysFile(r: EnvReader, plans: PlanBook): KeysFile {
  const none: KeysFile = { keys: [], customers: [] };
  const file = r.string('API_KEYS_FILE');
  if (file === undefined) return none;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    r.problems.push(`API_KEYS_FILE=${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    return none;
  }
  const contents = keysFileContents(text, `API_KEYS_FILE=${file}`, plans);
  if (!('problems' in contents)) return contents;
  r.problems.push(...contents.problems);
  return none;
}

/** CORS_ORIGINS: comma-separated origins, each exactly as a browser sends it (scheme://host[:port]). */
function parseCorsOrigins(r: EnvReader): string[] {
  const raw = r.string('CORS_ORIGINS');
  if (raw === undefined) return [];
  const origins: string[] = [];
  for (const entry of raw.split(',').map((s) => s.trim())) {
    let origin: string | undefined;
    try {
      origin = new URL(entry).origin;
    } catch {
      origin = undefined;
    }
    // The browser's Origin is compared as text: only an entry already in that form can ever match.
    if (origin !== entry || !/^https?:/.test(entry)) {
      r.problems.push(
        `CORS_ORIGINS entries must be origins such as https://app.example.com (scheme, host, optional port; no path, no trailing slash, no *), got "${entry}"`,
      );
      continue;
    }
    origins.push(entry);
  }
  return origins;
}

export interface ApiDocumentConfig {
  /** Base addresses of the deployments, each ending in /v1; unset: the gateway's own /v1. */
  productionUrl: string | undefined;
  stagingUrl: string | undefined;
  contact: { name: string; email?: string; url?: string };
  /** `url` or `identifier` (an SPDX expression), never both. */
  license: { name: string; url?: string; identifier?: string };
}

/** A base address as the spec gives it: absolute http(s), ending in the version segment /v1. */
function parseBaseUrl(r: EnvReader, name: string): string | undefined {
  const before = r.problems.length;
  const raw = r.url(name, ['http:', 'https:']);
  if (raw === undefined || r.problems.length > before) return raw;
  if (!/^https?:\/\/[^/?#]+(\/[^?#]*)?\/v1$/i.test(raw)) {
    r.problems.push(`${name} must be a base address ending in /v1 (no query, no trailing slash), got "${raw}"`);
  }
  return raw;
}

/** The portal's listener and the address customers reach it at (PORTAL_URL, else the listener's). */
function parsePortal(
  r: EnvReader,
): Pick<
  GatewayConfig,
  'portalHost' | 'portalPort' | 'portalUrl' | 'portalSessionIdleMs' | 'portalPerMinute' | 'portalSignInPerMinute'
> {
  const portalHost = r.host('PORTAL_HOST', '0.0.0.0');
  const portalPort = r.int('PORTAL_PORT', 8082, 0, 65535);
  const before = r.problems.length;
  const raw = r.url('PORTAL_URL', ['http:', 'https:']);
  if (raw !== undefined && r.problems.length === before && !/^https?:\/\/[^/?#]+$/i.test(raw)) {
    r.problems.push(
      `PORTAL_URL must be an origin such as https://portal.example.com (no path, no trailing slash), got "${raw}"`,
    );
  }
  return {
    portalHost,
    portalPort,
    portalUrl: raw ?? `http://127.0.0.1:${portalPort}`,
    // From a minute to the session's hour: an hour is the same as no idle end.
    portalSessionIdleMs: r.int('PORTAL_SESSION_IDLE_MS', 15 * 60_000, 60_000, 60 * 60_000),
    portalPerMinute: r.int('PORTAL_PER_MINUTE', 300, 1, 1_000_000),
    portalSignInPerMinute: r.int('PORTAL_SIGN_IN_PER_MINUTE', 20, 1, 1_000),
  };
}

function parseApiDocument(r: EnvReader): ApiDocumentConfig {
  const email = r.string('API_CONTACT_EMAIL');
  // Enough to catch a URL or a name put here by mistake; the address itself is the operator's.
  if (email !== undefined && !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email)) {
    r.problems.push(`API_CONTACT_EMAIL must be an email address, got "${email}"`);
  }
  const contactUrl = r.url('API_CONTACT_URL', ['http:', 'https:']);
  const licenseName = r.string('API_LICENSE_NAME');
  const licenseUrl = r.url('API_LICENSE_URL', ['http:', 'https:']);
  let identifier = r.string('API_LICENSE_IDENTIFIER');
  if (licenseUrl !== undefined && identifier !== undefined) {
    r.problems.push('set API_LICENSE_URL or API_LICENSE_IDENTIFIER, not both');
  } else if (licenseName !== undefined && licenseUrl === undefined && identifier === undefined) {
    r.problems.push('API_LICENSE_NAME needs API_LICENSE_URL or API_LICENSE_IDENTIFIER (an SPDX expression)');
  }
  // The default names no public license: an SPDX reference of its own, as SPDX allows.
  if (licenseName === undefined && licenseUrl === undefined) identifier ??= 'LicenseRef-Proprietary';
  return {
    productionUrl: parseBaseUrl(r, 'PUBLIC_BASE_URL'),
    stagingUrl: parseBaseUrl(r, 'STAGING_BASE_URL'),
    contact: {
      name: r.string('API_CONTACT_NAME', 'Animal store API support'),
      ...(email !== undefined ? { email } : {}),
      ...(contactUrl !== undefined ? { url: contactUrl } : {}),
    },
    license: {
      name: licenseName ?? 'Proprietary',
      ...(licenseUrl !== undefined ? { url: licenseUrl } : identifier !== undefined ? { identifier } : {}),
    },
  };
}

function parseTrustProxy(raw: string | undefined, reader: EnvReader): FastifyServerOptions['trustProxy'] {
  if (raw === undefined) return false;
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  // A hop count is valid for proxy-addr though fastify's types omit it.
  if (/^\d+$/.test(raw)) return Number(raw) as unknown as string;
  const entries = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  // Checked as proxy-addr will: anything it cannot parse would crash fastify's start instead.
  const ipOrCidr = (entry: string) => {
    const [address = '', bits, ...rest] = entry.split('/');
    const version = isIP(address);
    if (version === 0 || rest.length > 0) return false;
    return bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (version === 4 ? 32 : 128));
  };
  for (const entry of entries) {
    if (/\/0+$/.test(entry) && ipOrCidr(entry)) {
      // proxy-addr refuses a zero prefix; every address a proxy is what TRUST_PROXY=true says.
      reader.problems.push(
        `TRUST_PROXY entry "${entry}" trusts every address: set TRUST_PROXY=true for that, or name your proxies' addresses`,
      );
    } else if (!ipOrCidr(entry) && !['loopback', 'linklocal', 'uniquelocal'].includes(entry)) {
      reader.problems.push(`TRUST_PROXY entry "${entry}" is not an IP, CIDR, hop count or true/false`);
    }
  }
  return entries;
}

function readSecret(reader: EnvReader, name: string, env: Env): string | undefined {
  const direct = reader.string(name);
  const file = reader.string(`${name}_FILE`);
  if (direct !== undefined) return direct;
  if (file === undefined) return undefined;
  try {
    return readFileSync(file, 'utf8').trim() || undefined;
  } catch {
    reader.problems.push(`${name}_FILE=${env[`${name}_FILE`]} cannot be read`);
    return undefined;
  }
}

/** A comma-separated list of host:port, as REDIS_SENTINELS and REDIS_CLUSTER_NODES take it. */
function parseHostPorts(reader: EnvReader, name: string): HostPort[] | undefined {
  const raw = reader.string(name);
  if (raw === undefined) return undefined;
  const out: HostPort[] = [];
  for (const entry of raw.split(',').map((s) => s.trim())) {
    const match = /^(\[[0-9a-f:.]+\]|[^\s:/[\]]+):(\d{1,5})$/i.exec(entry);
    const port = Number(match?.[2]);
    if (!match?.[1] || port < 1 || port > 65535) {
      reader.problems.push(`${name} must be comma-separated host:port entries, got "${entry}"`);
      continue;
    }
    out.push({ host: match[1].replace(/^\[(.*)\]$/, '$1'), port });
  }
  return out.length > 0 ? out : undefined;
}

const REDIS_MODES = ['REDIS_URL', 'REDIS_SENTINELS', 'REDIS_CLUSTER_NODES'] as const;
const REDIS_CREDENTIALS = ['REDIS_USERNAME', 'REDIS_PASSWORD', 'REDIS_PASSWORD_FILE', 'REDIS_TLS'];

/** Exactly one of REDIS_URL, REDIS_SENTINELS, REDIS_CLUSTER_NODES, or none (embedded). */
function parseRedis(r: EnvReader, env: Env): RedisTarget | undefined {
  const set = REDIS_MODES.filter((name) => r.string(name) !== undefined);
  if (set.length > 1) {
    r.problems.push(`set one of ${REDIS_MODES.join(', ')}, not ${set.join(' and ')}`);
    return undefined;
  }
  const auth = {
    username: r.string('REDIS_USERNAME'),
    password: readSecret(r, 'REDIS_PASSWORD', env),
    tls: r.oneOf('REDIS_TLS', ['true', 'false'] as const, 'false') === 'true',
  };
  const sentinels = parseHostPorts(r, 'REDIS_SENTINELS');
  const nodes = parseHostPorts(r, 'REDIS_CLUSTER_NODES');
  // Settings of a mode not in use would be ignored without a word: refuse them instead.
  const [mode] = set;
  const stray = [
    ...(mode === 'REDIS_SENTINELS' || mode === 'REDIS_CLUSTER_NODES' ? [] : REDIS_CREDENTIALS),
    ...(mode === 'REDIS_SENTINELS' ? [] : ['REDIS_SENTINEL_MASTER']),
  ].filter((name) => r.string(name) !== undefined);
  if (stray.length > 0) {
    const names = `${stray.join(', ')} ${stray.length > 1 ? 'are' : 'is'}`;
    r.problems.push(
      !mode
        ? `${names} set, but none of ${REDIS_MODES.join(', ')}`
        : mode === 'REDIS_URL'
          ? `${names} not used with REDIS_URL: put credentials in the URL (rediss://user:password@host:port for TLS)`
          : `${names} not used with ${mode}`,
    );
  }
  const url = r.url('REDIS_URL', ['redis:', 'rediss:']);
  if (url !== undefined) return { mode: 'standalone', url };
  if (sentinels) {
    return { mode: 'sentinel', sentinels, masterName: r.string('REDIS_SENTINEL_MASTER', 'mymaster'), auth };
  }
  if (nodes) return { mode: 'cluster', nodes, auth };
  return undefined;
}

/**
 * BAN_*: a refusal counts toward a ban while its Retry-After (at least RETRY_AFTER_MIN_SECONDS, at
 * most BAN_WINDOW_SECONDS, less BAN_GRACE_MS) runs; more than BAN_THRESHOLD at once ban the key.
 */
function parseBanPolicy(r: EnvReader): BanPolicy {
  const ban: BanPolicy = {
    threshold: r.int('BAN_THRESHOLD', 50, 1, 1_000_000),
    windowMs: r.int('BAN_WINDOW_SECONDS', 60, 1, 86_400) * 1000,
    durationMs: r.int('BAN_SECONDS', 900, 1, 30 * 86_400) * 1000,
    graceMs: r.int('BAN_GRACE_MS', 500, 0, 60_000),
    minRetryAfterMs: r.int('RETRY_AFTER_MIN_SECONDS', 8, 0, 3_600) * 1000,
  };
  // Otherwise no refusal, or none told the shortest wait, would ever count: bans would be off.
  r.require(
    ban.graceMs < ban.windowMs,
    `BAN_GRACE_MS (${ban.graceMs}) must be less than BAN_WINDOW_SECONDS in milliseconds (${ban.windowMs})`,
  );
  r.require(
    ban.minRetryAfterMs === 0 || ban.graceMs < ban.minRetryAfterMs,
    `BAN_GRACE_MS (${ban.graceMs}) must be less than RETRY_AFTER_MIN_SECONDS in milliseconds (${ban.minRetryAfterMs})`,
  );
  return ban;
}

/** The listeners server.ts opens: the admin API's and the portal's only with an admin token. */
function listenerSettings(c: GatewayConfig): ListenerSetting[] {
  return [
    { portVariable: 'PORT', host: c.host, port: c.port },
    ...(c.adminToken
      ? [
          { portVariable: 'ADMIN_PORT', host: c.adminHost, port: c.adminPort },
          { portVariable: 'PORTAL_PORT', host: c.portalHost, port: c.portalPort },
        ]
      : []),
    { portVariable: 'METRICS_PORT', host: c.metricsHost, port: c.metricsPort },
  ];
}

/** `server.js migrate`'s environment: MONGO_URL and the database it names (default `gateway`). */
export const loadMigrationConfig = (env: Env): MongoTarget => loadMongoTarget(env, 'gateway');

/** Parses and validates the gateway's environment once, at start; throws ConfigError listing every problem. */
export function loadConfig(env: Env): GatewayConfig {
  const r = new EnvReader(env);
  const production = env.NODE_ENV === 'production';
  const redis = parseRedis(r, env);
  const mongoUrl = r.url('MONGO_URL', ['mongodb:', 'mongodb+srv:']);
  const adminToken = readSecret(r, 'ADMIN_TOKEN', env);
  if (production) {
    r.require(
      redis !== undefined || REDIS_MODES.some((name) => r.string(name) !== undefined),
      'REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES is required when NODE_ENV=production (limits must be shared)',
    );
    r.require(mongoUrl !== undefined, 'MONGO_URL is required when NODE_ENV=production (keys must survive restarts)');
  }
  if (adminToken !== undefined) {
    r.require(adminToken.length >= 16, 'ADMIN_TOKEN must be at least 16 characters');
  }
  // Keys name plans: the file's keys are checked against the plans in force.
  const plans = parsePlans(r);
  const keysFile = parseApiKeysFile(r, plans);
  const upstreamTimeoutMs = r.int('UPSTREAM_TIMEOUT_MS', 10_000, 100, 600_000);
  const config: GatewayConfig = {
    production,
    host: r.host('HOST', '0.0.0.0'),
    port: r.int('PORT', 8080, 0, 65535),
    adminHost: r.host('ADMIN_HOST', '127.0.0.1'),
    adminPort: r.int('ADMIN_PORT', 8081, 0, 65535),
    adminToken,
    ...parsePortal(r),
    serverTiming: r.oneOf('SERVER_TIMING', ['0', '1'] as const, '0') === '1',
    metricsHost: r.host('METRICS_HOST', '127.0.0.1'),
    metricsPort: r.int('METRICS_PORT', 9464, 0, 65535),
    petsUrl: r.url('PETS_URL', ['http:', 'https:'], 'http://127.0.0.1:8090') as string,
    redis,
    mongoUrl,
    mongoDb: r.mongoDatabase('MONGO_URL', mongoUrl, 'gateway'),
    keysIn: mongoUrl !== undefined ? 'mongo' : redis !== undefined ? 'redis' : 'memory',
    trustProxy: parseTrustProxy(r.string('TRUST_PROXY'), r),
    failureMode: r.oneOf('RATE_LIMIT_FAILURE_MODE', ['open', 'closed'] as const, 'open'),
    ban: parseBanPolicy(r),
    anonPerMinute: r.int('ANON_PER_MINUTE', 60, 1, 1_000_000),
    apiKeysFile: r.string('API_KEYS_FILE'),
    apiKeys: keysFile.keys,
    apiKeyCustomers: keysFile.customers,
    logLevel: r.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
    requestTimeoutMs: r.int('REQUEST_TIMEOUT_MS', 30_000, 100, 600_000),
    upstreamTimeoutMs,
    redisCommandTimeoutMs: r.int('REDIS_COMMAND_TIMEOUT_MS', 250, 10, 10_000),
    keyLookupTimeoutMs: r.int('KEY_LOOKUP_TIMEOUT_MS', 2_000, 50, 30_000),
    redisPrefix: r.string('REDIS_PREFIX', 'gw:'),
    keyCacheMax: r.int('KEY_CACHE_MAX', 50_000, 1, 10_000_000),
    keyCacheTtlMs: r.int('KEY_CACHE_TTL_SECONDS', 600, 1, 86_400) * 1000,
    // 63 days hold two whole billing periods (at most 31 days each, and a DST hour), so the
    // previous period's invoice preview can be read on any day of the current one.
    usageHistoryMs: r.int('USAGE_HISTORY_DAYS', 63, 1, 400) * 86_400_000,
    usageSpoolDir: r.string('USAGE_SPOOL_DIR'),
    // Never below the history's 63 days: creditsSpent reads the previous period's spend entries.
    creditsLedgerMs: r.int('CREDITS_LEDGER_DAYS', DEFAULT_LEDGER_RETENTION_MS / 86_400_000, 63, 3650) * 86_400_000,
    revocationPollMs: r.int('REVOCATION_POLL_MS', 2_000, 100, 60_000),
    shutdownGraceMs: r.int('SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    overload: readOverloadConfig(r),
    apiDocument: parseApiDocument(r),
    corsOrigins: parseCorsOrigins(r),
    plans,
    webhooks: parseWebhooksConfig(r),
    metering: parseMetering(r, upstreamTimeoutMs),
    regions: parseRegions(r),
  };
  r.distinctListeners(listenerSettings(config));
  r.done();
  return config;
}
