import { LRUCache } from 'lru-cache';
import { sameSecret } from './api-key.js';
import type { KeyRecord, KeyStore } from './key-store.js';

/** A presented secret, matched to its key record. */
export interface ResolvedKey {
  record: KeyRecord;
  /**
   * Epoch ms from which this secret is refused with `expired_api_key` (the key's expiry, or for a
   * rotated-out secret the end of its grace); Infinity when it never expires. Parsed once when
   * cached, so the gate's per-request check is one comparison.
   */
  endsAt: number;
  /** Which of the record's secrets was presented. */
  secret: 'current' | 'previous';
}

/** Matches a hash to a record's current or previous secret; null when it is neither, or the key is revoked. */
function resolveSecret(record: KeyRecord | null, sha256: string): ResolvedKey | null {
  if (!record || record.revokedAt) return null;
  const keyEnds = record.expiresAt ? Date.parse(record.expiresAt) : Number.POSITIVE_INFINITY;
  if (sameSecret(record.sha256, sha256)) return { record, endsAt: keyEnds, secret: 'current' };
  if (record.previous && sameSecret(record.previous.sha256, sha256)) {
    return { record, endsAt: Math.min(keyEnds, Date.parse(record.previous.expiresAt)), secret: 'previous' };
  }
  return null;
}

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
 * call. A changed key (updated, rotated, revoked) is evicted by id: locally at once, on other
 * replicas through `evict` driven by events or by keySync's poll of the store.
 */
export class KeyResolver {
  private readonly known: LRUCache<string, ResolvedKey>;
  /** The cached hashes of each key id (a key has up to two secrets), so eviction by id needs no scan. */
  private readonly hashesById = new Map<string, Set<string>>();
  /**
   * Unknown keys live apart and in fewer slots: anyone can make well-formed keys (the checksum
   * is public), and a flood of them must not push the real keys out of the cache.
   */
  private readonly unknown: LRUCache<string, true>;
  private readonly pending = new Map<string, Promise<ResolvedKey | null>>();
  private readonly fromFile = new Map<string, ResolvedKey>();
  private readonly fileById = new Map<string, KeyRecord>();
  /**
   * Counts evictions. A lookup that an eviction overtook may have read the record as it was
   * before the change: its answer is used once but not cached, or the stale record would stay
   * until its TTL with nothing left to evict it.
   */
  private evictions = 0;

  constructor(
    private readonly store: KeyStore,
    fileRecords: KeyRecord[],
    private readonly options: KeyResolverOptions,
  ) {
    for (const record of fileRecords) {
      this.fileById.set(record.id, record);
      for (const sha256 of [record.sha256, record.previous?.sha256]) {
        const resolved = sha256 ? resolveSecret(record, sha256) : null;
        if (sha256 && resolved) this.fromFile.set(sha256, resolved);
      }
    }
    this.known = new LRUCache<string, ResolvedKey>({
      max: options.maxEntries,
      ttl: options.positiveTtlMs,
      dispose: (value, sha256) => {
        const hashes = this.hashesById.get(value.record.id);
        hashes?.delete(sha256);
        if (hashes?.size === 0) this.hashesById.delete(value.record.id);
      },
    });
    this.unknown = new LRUCache<string, true>({
      max: Math.max(1, Math.min(options.maxEntries, 10_000)),
      ttl: options.negativeTtlMs,
    });
  }

  /**
   * What this replica knows of a key without asking the store: its resolution, null when known
   * to be unknown or revoked, undefined when only the store can tell.
   */
  cached(sha256: string): ResolvedKey | null | undefined {
    const fromFile = this.fromFile.get(sha256);
    if (fromFile) return fromFile;
    const known = this.known.get(sha256);
    if (known) return known;
    return this.unknown.has(sha256) ? null : undefined;
  }

  /** Asks the store (one call for concurrent misses of one key) and remembers the answer. */
  fetch(sha256: string): Promise<ResolvedKey | null> {
    let lookup = this.pending.get(sha256);
    if (!lookup) {
      lookup = this.lookup(sha256).finally(() => this.pending.delete(sha256));
      this.pending.set(sha256, lookup);
    }
    return lookup;
  }

  private async lookup(sha256: string): Promise<ResolvedKey | null> {
    const started = performance.now();
    const evictionsBefore = this.evictions;
    let record: KeyRecord | null;
    try {
      record = await this.store.findByHash(sha256);
      this.options.onStoreCall?.('findByHash', (performance.now() - started) / 1000, true);
    } catch (err) {
      this.options.onStoreCall?.('findByHash', (performance.now() - started) / 1000, false);
      throw err;
    }
    const resolved = resolveSecret(record, sha256);
    if (this.evictions !== evictionsBefore) return resolved;
    if (resolved) {
      // Expired keys are cached too: their refusals then cost the store nothing.
      this.known.set(sha256, resolved);
      const hashes = this.hashesById.get(resolved.record.id);
      if (hashes) hashes.add(sha256);
      else this.hashesById.set(resolved.record.id, new Set([sha256]));
    } else {
      this.unknown.set(sha256, true);
    }
    return resolved;
  }

  /** Drops every cached secret of a key that changed (plan, limits, expiry, rotation, revocation). */
  evict(id: string): void {
    this.evictions++;
    const hashes = this.hashesById.get(id);
    if (!hashes) return;
    for (const sha256 of [...hashes]) this.known.delete(sha256);
    this.hashesById.delete(id);
  }

  /** Keys from API_KEYS_FILE are declarative: the file, not the admin API, says whether they exist. */
  fileRecord(id: string): KeyRecord | undefined {
    return this.fileById.get(id);
  }

  fileRecords(): KeyRecord[] {
    return [...this.fileById.values()];
  }
}
