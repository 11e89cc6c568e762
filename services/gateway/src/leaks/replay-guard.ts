import { hash } from 'node:crypto';
import type { RedisClient } from '../redis/clients.js';

/**
 * Remembers the signed reports already taken (by their body's hash), so each is taken once: a
 * report captured on the way and sent again changes nothing. Kept `windowMs`, longer than any report's
 * retries from the scanner.
 */
export interface ReplayGuard {
  /** True the first time this report is offered within the window, false after. */
  firstSeen(report: string, windowMs: number): Promise<boolean>;
  /** Drops a report taken but not acted on (the store failed), so the scanner's retry is taken. */
  forget(report: string): Promise<void>;
}

/** The key a report is kept under: a hash, so the store holds nothing a scanner sent. */
const digest = (report: string): string => hash('sha256', report, 'hex');

export class MemoryReplayGuard implements ReplayGuard {
  private readonly seen = new Map<string, number>();
  constructor(private readonly now: () => number) {}

  async firstSeen(report: string, windowMs: number): Promise<boolean> {
    const at = this.now();
    for (const [key, until] of this.seen) if (until <= at) this.seen.delete(key);
    const key = digest(report);
    if (this.seen.has(key)) return false;
    this.seen.set(key, at + windowMs);
    return true;
  }

  async forget(report: string): Promise<void> {
    this.seen.delete(digest(report));
  }
}

/** In Redis, so a report replayed to another replica is refused there too. */
export class RedisReplayGuard implements ReplayGuard {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}

  async firstSeen(report: string, windowMs: number): Promise<boolean> {
    const set = await this.redis.set(`${this.prefix}leak-seen:${digest(report)}`, '1', 'PX', windowMs, 'NX');
    return set === 'OK';
  }

  async forget(report: string): Promise<void> {
    await this.redis.del(`${this.prefix}leak-seen:${digest(report)}`);
  }
}
