import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { WindowState } from './decision.js';

export interface AnonymousDecision {
  allowed: boolean;
  window: WindowState;
}

/**
 * Per-client-IP limit for requests without a valid key. rate-limiter-flexible fits this one
 * window exactly: Redis-backed and shared, an in-memory insurance limiter while Redis is down,
 * and an in-memory block once an IP is over its limit, so a flood costs no Redis calls.
 */
export class AnonymousLimiter {
  private readonly limiter: RateLimiterRedis | RateLimiterMemory;

  constructor(
    private readonly perMinute: number,
    redis: Redis | null,
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
    let res: RateLimiterRes;
    let allowed = true;
    try {
      res = await this.limiter.consume(ip);
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      res = rejection;
      allowed = false;
    }
    return {
      allowed,
      window: {
        name: 'anonymous',
        limit: this.perMinute,
        remaining: allowed ? res.remainingPoints : 0,
        windowSeconds: 60,
        resetAt: this.now() + res.msBeforeNext,
      },
    };
  }
}
