import type { Limits } from '../plans.js';
import type { BanPolicy, Decision, KeyLimiter, KeyUsage } from './key-limiter.js';
import { DAY_MS, MINUTE_MS, retryAfterMs, windowsFor } from './key-limiter.js';

interface Counter {
  count: number;
  expiresAt: number;
}

/**
 * The same decision as RedisKeyLimiter's script, in one process: the embedded default and the
 * per-replica fallback while Redis is unreachable. Time comes from `now` so tests drive it.
 */
export class MemoryKeyLimiter implements KeyLimiter {
  private readonly counters = new Map<string, Counter>();
  private lastSweep = 0;

  constructor(
    private readonly ban: BanPolicy,
    private readonly now: () => number = Date.now,
    private readonly maxCounters = 200_000,
  ) {}

  private read(key: string, now: number): Counter | undefined {
    const c = this.counters.get(key);
    if (c && c.expiresAt <= now) {
      this.counters.delete(key);
      return undefined;
    }
    return c;
  }

  private incr(key: string, ttlMs: number, now: number): Counter {
    const c = this.read(key, now);
    if (c) {
      c.count++;
      return c;
    }
    const fresh = { count: 1, expiresAt: now + ttlMs };
    this.counters.set(key, fresh);
    return fresh;
  }

  /** Expired counters are dropped lazily; a sweep bounds memory when many keys go quiet. */
  private sweep(now: number): void {
    if (this.counters.size < this.maxCounters && now - this.lastSweep < MINUTE_MS) return;
    this.lastSweep = now;
    for (const [key, c] of this.counters) if (c.expiresAt <= now) this.counters.delete(key);
    // Still too many live keys: forget the oldest, as a bounded cache would, down to 90% so the
    // next new key does not pay for another full sweep.
    const target = Math.floor(this.maxCounters * 0.9);
    for (const key of this.counters.keys()) {
      if (this.counters.size <= target) break;
      this.counters.delete(key);
    }
  }

  async consume(keyId: string, limits: Limits): Promise<Decision> {
    return this.consumeNow(keyId, limits);
  }

  private consumeNow(keyId: string, limits: Limits): Decision {
    const now = this.now();
    this.sweep(now);
    const m = this.read(`${keyId}:m`, now);
    const d = this.read(`${keyId}:d`, now);
    const ttl = (c: Counter | undefined) => (c ? c.expiresAt - now : 0);
    const ban = this.read(`${keyId}:ban`, now);
    if (ban) {
      return {
        outcome: 'banned',
        windows: windowsFor(limits, m?.count ?? 0, ttl(m), d?.count ?? 0, ttl(d), now),
        banEndsAt: ban.expiresAt,
      };
    }
    if ((m?.count ?? 0) < limits.perMinute && (d?.count ?? 0) < limits.perDay) {
      const m2 = this.incr(`${keyId}:m`, MINUTE_MS, now);
      const d2 = this.incr(`${keyId}:d`, DAY_MS, now);
      return { outcome: 'admitted', windows: windowsFor(limits, m2.count, ttl(m2), d2.count, ttl(d2), now) };
    }
    const windows = windowsFor(limits, m?.count ?? 0, ttl(m), d?.count ?? 0, ttl(d), now);
    if (this.inGrace(keyId, limits, m, d, now)) {
      return { outcome: 'limited', windows, retryAfterMs: retryAfterMs(windows, now) };
    }
    const strikes = this.incr(`${keyId}:strikes`, this.ban.windowMs, now);
    if (strikes.count > this.ban.threshold) {
      this.counters.delete(`${keyId}:strikes`);
      const banned = { count: 1, expiresAt: now + this.ban.durationMs };
      this.counters.set(`${keyId}:ban`, banned);
      return { outcome: 'banned', windows, banEndsAt: banned.expiresAt, started: { refusals: strikes.count } };
    }
    return { outcome: 'limited', windows, retryAfterMs: retryAfterMs(windows, now) };
  }

  /**
   * Whether this refusal falls within the grace after the first refusal since a window filled
   * (see BanPolicy). The grace record's count holds when the grace ends; it lives until the
   * refusing window resets, as the Redis script's grace key does.
   */
  private inGrace(keyId: string, limits: Limits, m: Counter | undefined, d: Counter | undefined, now: number): boolean {
    const grace = this.ban.graceMs;
    if (grace <= 0) return false;
    const existing = this.read(`${keyId}:grace`, now);
    if (existing) return now < existing.count;
    let until = now + grace;
    if (m && m.count >= limits.perMinute) until = Math.max(until, m.expiresAt);
    if (d && d.count >= limits.perDay) until = Math.max(until, d.expiresAt);
    this.counters.set(`${keyId}:grace`, { count: now + grace, expiresAt: until });
    return true;
  }

  async liftBan(keyId: string): Promise<void> {
    this.counters.delete(`${keyId}:ban`);
    this.counters.delete(`${keyId}:strikes`);
  }

  async banEndsAt(keyId: string): Promise<number | null> {
    return this.read(`${keyId}:ban`, this.now())?.expiresAt ?? null;
  }

  async usage(keyId: string): Promise<KeyUsage> {
    const now = this.now();
    const window = (c: Counter | undefined) => ({ used: c?.count ?? 0, resetAt: c ? c.expiresAt : null });
    return {
      minute: window(this.read(`${keyId}:m`, now)),
      day: window(this.read(`${keyId}:d`, now)),
      banEndsAt: this.read(`${keyId}:ban`, now)?.expiresAt ?? null,
      refusals: this.read(`${keyId}:strikes`, now)?.count ?? 0,
    };
  }
}
