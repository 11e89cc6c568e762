import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { type Env, EnvReader } from '@animal-store/common/env.js';
import type { FastifyServerOptions } from 'fastify';
import type { BanPolicy } from './limits/decision.js';
import type { FailureMode } from './limits/guarded-limiter.js';

export interface GatewayConfig {
  production: boolean;
  host: string;
  port: number;
  adminHost: string;
  adminPort: number;
  /** Admin API is off when no token is configured. */
  adminToken: string | undefined;
  petsUrl: string;
  redisUrl: string | undefined;
  mongoUrl: string | undefined;
  trustProxy: FastifyServerOptions['trustProxy'];
  failureMode: FailureMode;
  ban: BanPolicy;
  anonPerMinute: number;
  apiKeysFile: string | undefined;
  logLevel: string;
  /** Longest a client may take to send a whole request (headers and body); 408 after it. */
  requestTimeoutMs: number;
  /** Upper bound for the upstream to send response headers, and between body chunks. */
  upstreamTimeoutMs: number;
  /** No request waits on Redis longer than this. */
  redisCommandTimeoutMs: number;
  /** Prefix for every Redis key and channel the gateway uses, so deployments can share a Redis. */
  redisPrefix: string;
  keyCacheMax: number;
  keyCacheTtlMs: number;
  revocationPollMs: number;
  shutdownGraceMs: number;
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
    if (!ipOrCidr(entry) && !['loopback', 'linklocal', 'uniquelocal'].includes(entry)) {
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

/** Parses and validates the gateway's environment once, at start; throws ConfigError listing every problem. */
export function loadConfig(env: Env): GatewayConfig {
  const r = new EnvReader(env);
  const production = env.NODE_ENV === 'production';
  const redisUrl = r.url('REDIS_URL', ['redis:', 'rediss:']);
  const mongoUrl = r.url('MONGO_URL', ['mongodb:', 'mongodb+srv:']);
  const adminToken = readSecret(r, 'ADMIN_TOKEN', env);
  if (production) {
    r.require(redisUrl !== undefined, 'REDIS_URL is required when NODE_ENV=production (limits must be shared)');
    r.require(mongoUrl !== undefined, 'MONGO_URL is required when NODE_ENV=production (keys must survive restarts)');
  }
  if (adminToken !== undefined) {
    r.require(adminToken.length >= 16, 'ADMIN_TOKEN must be at least 16 characters');
  }
  const config: GatewayConfig = {
    production,
    host: r.string('HOST', '0.0.0.0'),
    port: r.int('PORT', 8080, 0, 65535),
    adminHost: r.string('ADMIN_HOST', '127.0.0.1'),
    adminPort: r.int('ADMIN_PORT', 8081, 0, 65535),
    adminToken,
    petsUrl: r.url('PETS_URL', ['http:', 'https:'], 'http://127.0.0.1:8090') as string,
    redisUrl,
    mongoUrl,
    trustProxy: parseTrustProxy(r.string('TRUST_PROXY'), r),
    failureMode: r.oneOf('RATE_LIMIT_FAILURE_MODE', ['open', 'closed'] as const, 'open'),
    ban: {
      threshold: r.int('BAN_THRESHOLD', 10, 1, 1_000_000),
      windowMs: r.int('BAN_WINDOW_SECONDS', 60, 1, 86_400) * 1000,
      durationMs: r.int('BAN_SECONDS', 900, 1, 30 * 86_400) * 1000,
    },
    anonPerMinute: r.int('ANON_PER_MINUTE', 60, 1, 1_000_000),
    apiKeysFile: r.string('API_KEYS_FILE'),
    logLevel: r.oneOf('LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, 'info'),
    requestTimeoutMs: r.int('REQUEST_TIMEOUT_MS', 30_000, 100, 600_000),
    upstreamTimeoutMs: r.int('UPSTREAM_TIMEOUT_MS', 10_000, 100, 600_000),
    redisCommandTimeoutMs: r.int('REDIS_COMMAND_TIMEOUT_MS', 250, 10, 10_000),
    redisPrefix: r.string('REDIS_PREFIX', 'gw:'),
    keyCacheMax: r.int('KEY_CACHE_MAX', 50_000, 1, 10_000_000),
    keyCacheTtlMs: r.int('KEY_CACHE_TTL_SECONDS', 600, 1, 86_400) * 1000,
    revocationPollMs: r.int('REVOCATION_POLL_MS', 2_000, 100, 60_000),
    shutdownGraceMs: r.int('SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
  };
  r.done();
  return config;
}
