import { LRUCache } from 'lru-cache';
import { hashApiKey, sameHash } from './api-key.js';
import type { KeyRecord, KeyStore } from './key-store.js';

export interface KeyResolverOptions {
  /** Most keys cached per replica; the least recently used fall out first. */
  maxEntries: number;
  /** How long a known key is trusted without asking the store again. */
  positiveTtlMs: number;
  /** How long an unknown well-formed key is remembered as unknown. */
  negativeTtlMs: number;
  /** Observes store latency for metrics. */
  onStoreCall?: (operation: string, seconds: number, ok: boolean) => void;
}

type Entry = { record: KeyRecord } | { record: null };

/**
 * Maps a presented key to its record. Hits stay in process (no store call in steady state);
 * keys from API_KEYS_FILE are consulted first; concurrent misses for one key share one store
 * call. Revocation evicts by id: locally at once, on other replicas through `evict` driven by
 * events or the revocation watcher.
 */
export class KeyResolver {
  private readonly cache: LRUCache<string, Entry>;
  private readonly pending = new Map<string, Promise<Entry>>();
  private readonly fromFile = new Map<string, KeyRecord>();

  constructor(
    private readonly store: KeyStore,
    fileRecords: KeyRecord[],
    private readonly options: KeyResolverOptions,
  ) {
    for (const record of fileRecords) this.fromFile.set(record.sha256, record);
    this.cache = new LRUCache<string, Entry>({ max: options.maxEntries, ttl: options.positiveTtlMs });
  }

  get fileRecordCount(): number {
    return this.fromFile.size;
  }

  /**
   * The live record for a well-formed key, or null when unknown or revoked. Answers without a
   * promise when the key is known in process (the steady state), with one on a cache miss.
   */
  resolve(key: string): KeyRecord | null | Promise<KeyRecord | null> {
    const sha256 = hashApiKey(key);
    const fromFile = this.fromFile.get(sha256);
    if (fromFile) return fromFile;
    const cached = this.cache.get(sha256);
    if (cached) return cached.record;
    return this.miss(sha256);
  }

  private async miss(sha256: string): Promise<KeyRecord | null> {
    let lookup = this.pending.get(sha256);
    if (!lookup) {
      lookup = this.lookup(sha256).finally(() => this.pending.delete(sha256));
      this.pending.set(sha256, lookup);
    }
    return (await lookup).record;
  }

  private async lookup(sha256: string): Promise<Entry> {
    const started = performance.now();
    let record: KeyRecord | null;
    try {
      record = await this.store.findByHash(sha256);
      this.options.onStoreCall?.('findByHash', (performance.now() - started) / 1000, true);
    } catch (err) {
      this.options.onStoreCall?.('findByHash', (performance.now() - started) / 1000, false);
      throw err;
    }
    const live = record && !record.revokedAt && sameHash(record.sha256, sha256) ? record : null;
    const entry: Entry = { record: live };
    this.cache.set(sha256, entry, live ? {} : { ttl: this.options.negativeTtlMs });
    return entry;
  }

  /** Drops every cached entry for a key id (after revocation). */
  evict(id: string, sha256?: string): void {
    if (sha256) this.cache.delete(sha256);
    for (const [hash, entry] of this.cache.entries()) {
      if (entry.record?.id === id) this.cache.delete(hash);
    }
  }

  /** Keys from API_KEYS_FILE are declarative: the file, not the admin API, says whether they exist. */
  fileRecord(id: string): KeyRecord | undefined {
    for (const record of this.fromFile.values()) if (record.id === id) return record;
    return undefined;
  }

  fileRecords(): KeyRecord[] {
    return [...this.fromFile.values()];
  }
}
