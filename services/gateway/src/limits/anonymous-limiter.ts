import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { RedisClient } from '../redis/clients.js';
import type { WindowState } from './key-limiter.js';

export interface AnonymousDecision {
  allowed: boolean;
  window: WindowState;
}

/**
 * The limiter's key for a client address. IPv6 clients usually hold a whole /64, so they are
 * counted per /64; otherwise one host could take a fresh budget (and a fresh counter) per
 * address. IPv4-mapped IPv6 addresses count as the IPv4 address.
 */
export function addressKey(ip: string): string {
  if (!ip.includes(':')) return ip;
  if (ip.startsWith('::ffff:') && ip.includes('.')) return ip.slice(7);
  const [head = '', tail = ''] = ip.split('::', 2);
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = ip.includes('::') ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right] : left;
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g || '0', 16).toString(16))
    .join(':')}::/64`;
}

/**
 * Per-client-IP limit for requests without a valid key. rate-limiter-flexible fits this one
 * window exactly: Redis-backed and shared, an in-memory insurance limiter while Redis is down,
 * and an in-memory block once an IP is over its limit, so a flood costs no Redis calls.
 */
export class AnonymousLimiter {
  private readonly limiter: RateLimiterRedis | RateLimiterMemory;

  constructor(
    readonly perMinute: number,
    redis: RedisClient | null,
    prefix: string,
    private readonly now: () => number = Date.now,
  ) {
    const base = { points: perMinute, duration: 60, keyPrefix: `${prefix}anon` };
    this.limiter = redis
      ? new RateLimiterRedis({
          ...base,
          storeClient: redis,
          rejectIfRedisNotReady: true,
          inMemoryBlockOnConsumed: perMinute,
          insuranceLimiter: new RateLimiterMemory(base),
        })
      : new RateLimiterMemory(base);
  }

  async consume(ip: string): Promise<AnonymousDecision> {
    const key = addressKey(ip);
    let res: RateLimiterRes;
    let allowed = true;
    try {
      res = await this.limiter.consume(key);
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      res = rejection;
      allowed = false;
    }
    const resetAt = this.now() + res.msBeforeNext;
    return {
      allowed,
      window: {
        name: 'anonymous',
        scope: 'key',
        limit: this.perMinute,
        remaining: allowed ? res.remainingPoints : 0,
        windowSeconds: 60,
        resetAt,
      },
    };
  }
}
