import type { Redis, Result } from 'ioredis';
import type { Limits } from '../plans.js';
import {
  type BanPolicy,
  DAY_MS,
  type Decision,
  type KeyLimiter,
  MINUTE_MS,
  retryAfterMs,
  windowsFor,
} from './decision.js';

/**
 * Both windows, the refusal count and the ban in one script, so a request costs one Redis
 * command in one write and the decision is atomic across replicas: a request is admitted only
 * when both windows have room, and only admitted requests are counted. rate-limiter-flexible
 * counts every attempt per limiter and needs one command per window, so it cannot keep the
 * windows independent of each other's refusals in a single round trip.
 *
 * KEYS: minute, day, ban, strikes. ARGV: perMinute, perDay, minuteMs, dayMs, banThreshold,
 * banWindowMs, banMs. Returns {outcome (0 admitted, 1 limited, 2 banned), minuteCount,
 * minuteTtl, dayCount, dayTtl, banTtl}.
 */
const LIMIT_SCRIPT = `
local v = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3])
local m = tonumber(v[1] or '0')
local d = tonumber(v[2] or '0')
if v[3] then
  return {2, m, redis.call('PTTL', KEYS[1]), d, redis.call('PTTL', KEYS[2]), redis.call('PTTL', KEYS[3])}
end
if m < tonumber(ARGV[1]) and d < tonumber(ARGV[2]) then
  local mttl = tonumber(ARGV[3])
  local dttl = tonumber(ARGV[4])
  m = redis.call('INCR', KEYS[1])
  if m == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) else mttl = redis.call('PTTL', KEYS[1]) end
  d = redis.call('INCR', KEYS[2])
  if d == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[4]) else dttl = redis.call('PTTL', KEYS[2]) end
  return {0, m, mttl, d, dttl, 0}
end
local strikes = redis.call('INCR', KEYS[4])
if strikes == 1 then redis.call('PEXPIRE', KEYS[4], ARGV[6]) end
local mttl = redis.call('PTTL', KEYS[1])
local dttl = redis.call('PTTL', KEYS[2])
if strikes > tonumber(ARGV[5]) then
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[7])
  redis.call('DEL', KEYS[4])
  return {2, m, mttl, d, dttl, tonumber(ARGV[7])}
end
return {1, m, mttl, d, dttl, 0}
`;

type ScriptResult = [number, number, number, number, number, number];

declare module 'ioredis' {
  interface RedisCommander<Context> {
    gatewayLimit(
      minuteKey: string,
      dayKey: string,
      banKey: string,
      strikesKey: string,
      ...args: Array<string | number>
    ): Result<ScriptResult, Context>;
  }
}

export class RedisKeyLimiter implements KeyLimiter {
  readonly kind = 'redis' as const;
  private readonly banArgs: [number, number, number];

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    ban: BanPolicy,
    private readonly now: () => number = Date.now,
  ) {
    this.banArgs = [ban.threshold, ban.windowMs, ban.durationMs];
    if (typeof (redis as Partial<Redis>).gatewayLimit !== 'function') {
      redis.defineCommand('gatewayLimit', { numberOfKeys: 4, lua: LIMIT_SCRIPT });
    }
  }

  /** Key names share a hash tag so the script's keys sit in one Redis Cluster slot. */
  keys(keyId: string): [string, string, string, string] {
    const base = `${this.prefix}{${keyId}}`;
    return [`${base}:m`, `${base}:d`, `${base}:ban`, `${base}:strikes`];
  }

  async consume(keyId: string, limits: Limits): Promise<Decision> {
    const [minuteKey, dayKey, banKey, strikesKey] = this.keys(keyId);
    const [outcome, m, mttl, d, dttl, banTtl] = await this.redis.gatewayLimit(
      minuteKey,
      dayKey,
      banKey,
      strikesKey,
      limits.perMinute,
      limits.perDay,
      MINUTE_MS,
      DAY_MS,
      ...this.banArgs,
    );
    const now = this.now();
    const windows = windowsFor(limits, m, mttl, d, dttl, now);
    if (outcome === 0) return { outcome: 'admitted', windows };
    if (outcome === 2) return { outcome: 'banned', windows, banEndsAt: now + banTtl };
    return { outcome: 'limited', windows, retryAfterMs: retryAfterMs(windows, now) };
  }

  async liftBan(keyId: string): Promise<void> {
    const [, , banKey, strikesKey] = this.keys(keyId);
    await this.redis.del(banKey, strikesKey);
  }

  async banEndsAt(keyId: string): Promise<number | null> {
    const [, , banKey] = this.keys(keyId);
    const ttl = await this.redis.pttl(banKey);
    return ttl > 0 ? this.now() + ttl : null;
  }
}
