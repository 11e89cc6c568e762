import { hash } from 'node:crypto';
import type { RedisClient } from '../redis/clients.js';

/**
 * Remembers the signed reports already taken, so the same signature is taken once: a report
 * captured on the way and sent again changes nothing. Kept `windowMs`, longer than any report's
 * retries from the scanner.
 */
export interface ReplayGuard {
  /** True the first time this signature is offered within the window, false after. */
  firstSeen(signature: string, windowMs: number): Promise<boolean>;
  /** Drops a signature taken but not acted on (the store failed), so the scanner's retry is taken. */
  forget(signature: string): Promise<void>;
}

/** The key a signature is kept under: its hash, so the store holds nothing a scanner sent. */
const digest = (signature: string): string => hash('sha256', signature, 'hex');

export class MemoryReplayGuard implements ReplayGuard {
  private readonly seen = new Map<string, number>();
  constructor(private readonly now: () => number) {}

  async firstSeen(signature: string, windowMs: number): Promise<boolean> {
    const at = this.now();
    for (const [key, until] of this.seen) if (until <= at) this.seen.delete(key);
    const key = digest(signature);
    if (this.seen.has(key)) return false;
    this.seen.set(key, at + windowMs);
    return true;
  }

  async forget(signature: string): Promise<void> {
    this.seen.delete(digest(signature));
  }
}

/** In Redis, so a report replayed to another replica is refused there too. */
export class RedisReplayGuard implements ReplayGuard {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}

  async firstSeen(signature: string, windowMs: number): Promise<boolean> {
    const set = await this.redis.set(`${this.prefix}leak-seen:${digest(signature)}`, '1', 'PX', windowMs, 'NX');
    return set === 'OK';
  }

  async forget(signature: string): Promise<void> {
    await this.redis.del(`${this.prefix}leak-seen:${digest(signature)}`);
  }
}
