import { LRUCache } from 'lru-cache';
import type { CustomerRecord, CustomerStore } from './customer-store.js';

export interface CustomerResolverOptions {
  /** Most customers cached per replica; the least recently used fall out first. */
  maxEntries: number;
  /** How long a customer is trusted without asking the store again. */
  ttlMs: number;
}

/**
 * A key's customer, for the gate: cached per replica beside the key cache, so a request of a key
 * of a customer costs no store call in steady state. A changed or deleted customer is evicted by
 * id: locally at once, on other replicas through `evict` driven by events or by keySync's poll of
 * the store (replicas/key-sync.ts), as keys are. A deleted customer is cached as null: its keys
 * are revoked with it (admin/customer-keys.ts), so only a request racing that revocation sees it.
 * API_KEYS_FILE's customers are held apart, as its keys are (keys/key-resolver.ts): they are all
 * in memory already and never change while the gateway runs, so they take no cache slot, never
 * fall out however many customers are active, and are the same record on every request.
 */
export class CustomerResolver {
  private readonly known: LRUCache<string, CustomerRecord | false>;
  private readonly fromFile: ReadonlyMap<string, CustomerRecord>;
  private readonly pending = new Map<string, Promise<CustomerRecord | null>>();
  /** Counts evictions: a lookup an eviction overtook may hold the record as it was, so it is not cached. */
  private evictions = 0;

  constructor(
    private readonly store: Pick<CustomerStore, 'get'>,
    fileRecords: readonly CustomerRecord[],
    options: CustomerResolverOptions,
  ) {
    this.fromFile = new Map(fileRecords.map((record) => [record.id, record]));
    this.known = new LRUCache<string, CustomerRecord | false>({ max: options.maxEntries, ttl: options.ttlMs });
  }

  /** The customer as this replica knows it: the record, null when gone, undefined when only the store can tell. */
  cached(id: string): CustomerRecord | null | undefined {
    const fromFile = this.fromFile.get(id);
    if (fromFile) return fromFile;
    const known = this.known.get(id);
    if (known === undefined) return undefined;
    return known === false ? null : known;
  }

  /** Asks the store (one call for concurrent misses of one customer) and remembers the answer. */
  fetch(id: string): Promise<CustomerRecord | null> {
    const fromFile = this.fromFile.get(id);
    if (fromFile) return Promise.resolve(fromFile);
    let lookup = this.pending.get(id);
    if (!lookup) {
      lookup = this.lookup(id).finally(() => this.pending.delete(id));
      this.pending.set(id, lookup);
    }
    return lookup;
  }

  private async lookup(id: string): Promise<CustomerRecord | null> {
    const evictionsBefore = this.evictions;
    const record = await this.store.get(id);
    if (this.evictions === evictionsBefore) this.known.set(id, record ?? false);
    return record;
  }

  /** Forgets a customer that changed (plan, limits, billing) or was deleted. */
  evict(id: string): void {
    // Stryker disable next-line UpdateOperator: any change to the count tells a lookup an eviction overtook it
    this.evictions++;
    this.known.delete(id);
  }
}
