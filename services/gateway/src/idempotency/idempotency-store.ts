/**
 * Where the admin API keeps what an `Idempotency-Key` did (admin/idempotency.ts): one opaque text
 * per key for a while, shared by the replicas (Redis) or this process's own (embedded).
 */
export interface IdempotencyStore {
  readonly kind: 'redis' | 'memory';
  /**
   * Keeps `value` under `key` for `ttlMs` unless something is kept there already: null when this
   * call kept it, else what was there (and nothing changes).
   */
  claim(key: string, value: string, ttlMs: number): Promise<string | null>;
  /** Replaces `from` with `to`, keeping its expiry, only while `from` is what is kept: true when it did. */
  replace(key: string, from: string, to: string): Promise<boolean>;
}

/** Embedded mode: records last as long as the process, or their time. */
export class MemoryIdempotencyStore implements IdempotencyStore {
  readonly kind = 'memory';
  private readonly records = new Map<string, { value: string; until: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  async claim(key: string, value: string, ttlMs: number): Promise<string | null> {
    const at = this.now();
    for (const [k, record] of this.records) if (record.until <= at) this.records.delete(k);
    const held = this.records.get(key);
    if (held) return held.value;
    this.records.set(key, { value, until: at + ttlMs });
    return null;
  }

  async replace(key: string, from: string, to: string): Promise<boolean> {
    const held = this.records.get(key);
    if (!held || held.until <= this.now() || held.value !== from) return false;
    held.value = to;
    return true;
  }
}
