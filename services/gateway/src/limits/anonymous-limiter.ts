import type { Redis } from 'ioredis';
import { LRUCache } from 'lru-cache';
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
  /** Addresses this replica has seen refused, until their window resets (bounded: a flood of addresses evicts the oldest). */
  private readonly refusedUntil = new LRUCache<string, number>({ max: 100_000 });

  constructor(
    readonly perMinute: number,
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

  /** True while this address is known to be over its limit: its requests need no further lookups. */
  isRefused(ip: string): boolean {
    const until = this.refusedUntil.get(ip);
    return until !== undefined && until > this.now();
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
    const resetAt = this.now() + res.msBeforeNext;
    if (!allowed) this.refusedUntil.set(ip, resetAt);
    return {
      allowed,
      window: {
        name: 'anonymous',
        limit: this.perMinute,
        remaining: allowed ? res.remainingPoints : 0,
        windowSeconds: 60,
        resetAt,
      },
    };
  }
}
