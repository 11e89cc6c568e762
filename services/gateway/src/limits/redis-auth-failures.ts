import type { Redis, Result } from 'ioredis';
import type { RedisClient } from '../redis/clients.js';
import { type AuthFailures, type FailureCount, MemoryAuthFailures } from './auth-failures.js';

/**
 * One failure counted. KEYS: the address's counter; ARGV: now on the gateway's clock, the window.
 * A counter whose window has ended on that clock (or none) starts again at 1, expiring at its
 * end; otherwise it is incremented, its expiry kept. Decided on the gateway's clock as the portal
 * sessions are, so the window is the same whichever Redis node's clock runs ahead.
 */
const RECORD_SCRIPT = `
local now = tonumber(ARGV[1])
local ends = redis.call('PEXPIRETIME', KEYS[1])
if ends <= now then
  ends = now + tonumber(ARGV[2])
  redis.call('SET', KEYS[1], 1, 'PXAT', string.format('%d', ends))
  return {1, ends}
end
return {redis.call('INCR', KEYS[1]), ends}
`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    gatewayAdminAuthFailure(key: string, now: number, windowMs: number): Result<[number, number], Context>;
  }
}

/**
 * One string key per address (`<prefix>admin:auth-failures:<address>`), any Cluster slot, cleared
 * by its own expiry. While Redis is away each replica counts in its own memory, so the limit
 * still holds per replica rather than not at all.
 */
export class RedisAuthFailures implements AuthFailures {
  readonly kind = 'redis';
  private readonly fallback = new MemoryAuthFailures();

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {
    if (typeof (redis as Partial<Redis>).gatewayAdminAuthFailure !== 'function') {
      redis.defineCommand('gatewayAdminAuthFailure', { numberOfKeys: 1, lua: RECORD_SCRIPT });
    }
  }

  async record(address: string, at: number, windowMs: number): Promise<FailureCount> {
    try {
      const [count, resetAt] = await this.redis.gatewayAdminAuthFailure(
        `${this.prefix}admin:auth-failures:${address}`,
        at,
        windowMs,
      );
      return { count, resetAt };
    } catch {
      return this.fallback.record(address, at, windowMs);
    }
  }
}
