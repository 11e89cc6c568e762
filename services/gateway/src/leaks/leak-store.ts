import type { RedisClient } from '../redis/clients.js';
import type { LeakResponse } from './config.js';

/** One report of a leaked key that was proven (a live secret of a key), and what was done. */
export interface LeakRecord {
  id: string;
  keyId: string;
  /** The key's customer, when it has one: the portal shows the report to it. */
  customerId?: string;
  /** Who reported it: the secret-scanning receiver, or an operator (POST /admin/leaks). */
  reporter: 'github' | 'manual';
  /** The scanner's token type (GitHub's `type`), when it gave one. */
  type?: string;
  /** Where it was found: GitHub's `source` (content, commit, gist…), or the operator's word. */
  source: string;
  url?: string;
  reportedAt: string;
  /** What the report did to the key: notify only, rotate with a grace, revoke. */
  response: LeakResponse;
  /** Which of the key's secrets leaked: the current one, or one a rotation already replaced. */
  secret: 'current' | 'previous';
  /** After a rotation: when the leaked secret stops working. */
  leakedSecretEndsAt?: string;
  /** After a rotation: the shown prefix of the successor secret (the secret itself is never kept). */
  successorPrefix?: string;
}

/** The most reports kept: older ones fall out (the audit lines keep them all). */
export const LEAKS_KEPT = 1_000;

/** Where leak reports live: Redis beside the limits, or this process's memory. */
export interface LeakStore {
  add(record: LeakRecord): Promise<void>;
  /** Newest first, at most `limit`. */
  list(limit: number): Promise<LeakRecord[]>;
  /** The reports of a customer's keys, newest first. */
  ofCustomer(customerId: string): Promise<LeakRecord[]>;
  /**
   * Keeps a rotation's new secret until `untilMs` (the leaked secret's end), for the customer to
   * take once in the portal: the one place the gateway holds a plaintext key, and only that long.
   */
  keepSuccessor(leakId: string, key: string, untilMs: number): Promise<void>;
  /** The kept secret, once: null when it was taken, its time is over, or there never was one. */
  takeSuccessor(leakId: string): Promise<string | null>;
}

export class MemoryLeakStore implements LeakStore {
  private readonly records: LeakRecord[] = [];
  private readonly successors = new Map<string, { key: string; untilMs: number }>();
  constructor(private readonly now: () => number) {}

  async add(record: LeakRecord): Promise<void> {
    this.records.unshift(structuredClone(record));
    this.records.length = Math.min(this.records.length, LEAKS_KEPT);
  }

  async list(limit: number): Promise<LeakRecord[]> {
    return structuredClone(this.records.slice(0, limit));
  }

  async ofCustomer(customerId: string): Promise<LeakRecord[]> {
    return structuredClone(this.records.filter((r) => r.customerId === customerId));
  }

  async keepSuccessor(leakId: string, key: string, untilMs: number): Promise<void> {
    this.successors.set(leakId, { key, untilMs });
  }

  async takeSuccessor(leakId: string): Promise<string | null> {
    const kept = this.successors.get(leakId);
    this.successors.delete(leakId);
    return kept && kept.untilMs > this.now() ? kept.key : null;
  }
}

/** One capped list, newest first: every replica's reports in one place. */
export class RedisLeakStore implements LeakStore {
  private readonly key: string;
  constructor(
    private readonly redis: RedisClient,
    prefix: string,
  ) {
    this.key = `${prefix}leaks`;
  }

  async add(record: LeakRecord): Promise<void> {
    await this.redis
      .multi()
      .lpush(this.key, JSON.stringify(record))
      .ltrim(this.key, 0, LEAKS_KEPT - 1)
      .exec();
  }

  async list(limit: number): Promise<LeakRecord[]> {
    if (limit <= 0) return [];
    const lines = await this.redis.lrange(this.key, 0, limit - 1);
    return lines.map((line) => JSON.parse(line) as LeakRecord);
  }

  async ofCustomer(customerId: string): Promise<LeakRecord[]> {
    return (await this.list(LEAKS_KEPT)).filter((r) => r.customerId === customerId);
  }

  private successorKey(leakId: string): string {
    return `${this.key}:successor:${leakId}`;
  }

  async keepSuccessor(leakId: string, key: string, untilMs: number): Promise<void> {
    // Redis drops it at the end of the grace, on its own clock: nothing to sweep.
    await this.redis.set(this.successorKey(leakId), key, 'PXAT', untilMs);
  }

  async takeSuccessor(leakId: string): Promise<string | null> {
    // Read and delete at once: two tabs asking together get it once between them.
    const [[, key] = []] =
      (await this.redis.multi().get(this.successorKey(leakId)).del(this.successorKey(leakId)).exec()) ?? [];
    return typeof key === 'string' ? key : null;
  }
}
