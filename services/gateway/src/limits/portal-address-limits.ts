import { LRUCache } from 'lru-cache';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { RedisClient } from '../redis/clients.js';
import { addressKey } from './anonymous-limiter.js';

/** One per-address window of the portal's: its name in the RateLimit fields and its budget a minute. */
interface Window {
  name: 'portal' | 'portal-sign-in';
  perMinute: number;
  limiter: RateLimiterRedis | RateLimiterMemory;
}

/**
 * The portal listener's per-address limits: every request (PORTAL_PER_MINUTE), and within it the
 * sign-in link's visits (PORTAL_SIGN_IN_PER_MINUTE), which is what a guesser would hammer.
 *
 * Shared in Redis when the gateway has it, not per replica: behind a load balancer a guesser's
 * requests spread over every replica, and a per-replica count would give it N times the budget.
 * While Redis is away each replica counts in its own memory (the insurance limiter), so the limit
 * still holds per replica; an address over its limit is also blocked in memory until its window
 * ends, so a flood costs no Redis calls. The address is `request.ip`: the peer's, or behind
 * proxies TRUST_PROXY allows, the client's from X-Forwarded-For; an IPv6 client counts per /64.
 */
export class PortalAddressLimits {
  private readonly windows: Window[];
  /** Addresses refused in their current minute, per window: what this replica has already said. */
  private readonly refused = new LRUCache<string, true>({ max: 10_000, ttl: 60_000 });

  constructor(perMinute: number, signInPerMinute: number, redis: RedisClient | null, prefix: string) {
    const limiter = (name: string, points: number) => {
      const base = { points, duration: 60, keyPrefix: `${prefix}${name}` };
      return redis
        ? new RateLimiterRedis({
            ...base,
            storeClient: redis,
            rejectIfRedisNotReady: true,
            inMemoryBlockOnConsumed: points,
            insuranceLimiter: new RateLimiterMemory(base),
          })
        : new RateLimiterMemory(base);
    };
    this.windows = [
      { name: 'portal', perMinute, limiter: limiter('portal:addr', perMinute) },
      { name: 'portal-sign-in', perMinute: signInPerMinute, limiter: limiter('portal:sign-in', signInPerMinute) },
    ];
  }

  /** Counts a request from `ip`; the window it is over and the ms until it has room, or null. */
  async consume(ip: string, signIn: boolean): Promise<{ window: Window; msBeforeNext: number; first: boolean } | null> {
    const key = addressKey(ip);
    for (const window of signIn ? this.windows : this.windows.slice(0, 1)) {
      try {
        await window.limiter.consume(key);
      } catch (rejection) {
        if (!(rejection instanceof RateLimiterRes)) throw rejection;
        return { window, msBeforeNext: rejection.msBeforeNext, first: this.firstRefusal(window, key, rejection) };
      }
    }
    return null;
  }

  /** Whether this is the replica's first refusal of the address in the window's current minute. */
  private firstRefusal(window: Window, key: string, rejection: RateLimiterRes): boolean {
    const name = `${window.name} ${key}`;
    if (this.refused.has(name)) return false;
    this.refused.set(name, true, { ttl: Math.max(1, rejection.msBeforeNext) });
    return true;
  }
}
