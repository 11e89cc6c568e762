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

/**
 * Maps a presented key to its record. Hits stay in process (no store call in steady state);
 * keys from API_KEYS_FILE are consulted first; concurrent misses for one key share one store
 * call. Revocation evicts by id: locally at once, on other replicas through `evict` driven by
 * events or the revocation watcher.
 */
export class KeyResolver {
  private readonly known: LRUCache<string, KeyRecord>;
  /**
   * Unknown keys live apart and in fewer slots: anyone can make well-formed keys (the checksum
   * is public), and a flood of them must not push the real keys out of the cache.
   */
  private readonly unknown: LRUCache<string, true>;
  private readonly pending = new Map<string, Promise<KeyRecord | null>>();
  private readonly fromFile = new Map<string, KeyRecord>();

  constructor(
    private readonly store: KeyStore,
    fileRecords: KeyRecord[],
    private readonly options: KeyResolverOptions,
  ) {
    for (const record of fileRecords) this.fromFile.set(record.sha256, record);
    this.known = new LRUCache<string, KeyRecord>({ max: options.maxEntries, ttl: options.positiveTtlMs });
    this.unknown = new LRUCache<string, true>({
      max: Math.max(1, Math.min(options.maxEntries, 10_000)),
      ttl: options.negativeTtlMs,
    });
  }

  /**
   * What this replica knows of a key without asking the store: its record, null when known to be
   * unknown or revoked, undefined when only the store can tell.
   */
  cached(sha256: string): KeyRecord | null | undefined {
    const fromFile = this.fromFile.get(sha256);
    if (fromFile) return fromFile;
    const known = this.known.get(sha256);
    if (known) return known;
    return this.unknown.has(sha256) ? null : undefined;
  }

  /** Asks the store (one call for concurrent misses of one key) and remembers the answer. */
  fetch(sha256: string): Promise<KeyRecord | null> {
    let lookup = this.pending.get(sha256);
    if (!lookup) {
      lookup = this.lookup(sha256).finally(() => this.pending.delete(sha256));
      this.pending.set(sha256, lookup);
    }
    return lookup;
  }

  /** The live record for a key, or null when unknown or revoked. */
  async resolve(key: string): Promise<KeyRecord | null> {
    const sha256 = hashApiKey(key);
    const cached = this.cached(sha256);
    return cached === undefined ? this.fetch(sha256) : cached;
  }

  private async lookup(sha256: string): Promise<KeyRecord | null> {
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
    if (live) this.known.set(sha256, live);
    else this.unknown.set(sha256, true);
    return live;
  }

  /** Drops what is cached for a revoked key: by its hash when known, else by scanning for its id. */
  evict(id: string, sha256?: string): void {
    if (sha256) {
      this.known.delete(sha256);
      this.unknown.delete(sha256);
      return;
    }
    for (const [hash, record] of this.known.entries()) {
      if (record.id === id) this.known.delete(hash);
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
