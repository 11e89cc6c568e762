import { ApiError } from '@animal-store/common/errors.js';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';

/** Reads of GET /v1/usage one key may make per minute on one replica. */
export const USAGE_READS_PER_MINUTE = 30;

/**
 * GET /v1/usage's own limit, apart from the key's windows: it takes nothing from them and counts
 * toward no ban, so without a limit of its own a client could poll it as fast as it likes, and
 * each read costs a few Redis calls. Kept in this replica's memory (no Redis call to decide: the
 * point is to spare Redis), per key; with N replicas a key may read up to N times as often, which
 * still bounds the load per key.
 */
export class UsageReadLimit {
  private readonly limiter = new RateLimiterMemory({ points: USAGE_READS_PER_MINUTE, duration: 60 });

  /** Undefined when the key may read its usage now, else the 429 to answer. */
  async take(keyId: string): Promise<ApiError | undefined> {
    try {
      await this.limiter.consume(keyId);
      return undefined;
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      const seconds = Math.max(1, Math.ceil(rejection.msBeforeNext / 1000));
      return new ApiError(
        429,
        'rate_limit_exceeded',
        `Usage may be read ${USAGE_READS_PER_MINUTE} times a minute per key; retry in ${seconds} s. Your quotas are untouched.`,
        { 'retry-after': String(seconds) },
      );
    }
  }
}
