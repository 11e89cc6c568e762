import { describe, expect, it } from 'vitest';
import { checkNewCustomer } from '../../src/customers/customer-operations.js';
import { CustomerResolver } from '../../src/customers/customer-resolver.js';
import type { CustomerRecord, CustomerStore } from '../../src/customers/customer-store.js';
import { MemoryCustomerStore } from '../../src/customers/memory-customer-store.js';
import { DEFAULT_PLANS } from '../../src/plans/plans.js';

/*
 * The resolver's cache through its own API, on the real memory store: what it holds after a
 * lookup (the record, or null for a customer that is gone), one store call for concurrent misses,
 * its bound, and a lookup an eviction overtook left uncached. The gate's side: customer-resolver.test.ts.
 */

const NOW = Date.parse('2026-11-26T10:00:00.000Z');
const OPTIONS = { maxEntries: 10, ttlMs: 60_000 };
const customer = (name: string): CustomerRecord => checkNewCustomer(DEFAULT_PLANS, { name, plan: 'pro' }, NOW);

/** The store's gets, by id; `hold` makes the next get wait for `release` (the store answers as it stands then). */
function watched(store: MemoryCustomerStore) {
  const asked: string[] = [];
  let gate: Promise<void> | null = null;
  let release = () => {};
  const get = store.get.bind(store);
  const wrapped: Pick<CustomerStore, 'get'> = {
    get: async (id) => {
      asked.push(id);
      if (gate) await gate;
      return get(id);
    },
  };
  return {
    store: wrapped,
    asked,
    hold() {
      gate = new Promise((resolve) => {
        release = () => {
          gate = null;
          resolve();
        };
      });
    },
    release: () => release(),
  };
}

async function storeWith(...records: CustomerRecord[]): Promise<MemoryCustomerStore> {
  const store = new MemoryCustomerStore();
  for (const record of records) await store.insert(record);
  return store;
}

describe('CustomerResolver', () => {
  it('knows nothing before a lookup, then the record, or null for a customer the store does not have', async () => {
    const acme = customer('Acme');
    const w = watched(await storeWith(acme));
    const resolver = new CustomerResolver(w.store, [], OPTIONS);
    expect(resolver.cached(acme.id)).toBeUndefined();
    expect(await resolver.fetch(acme.id)).toEqual(acme);
    expect(resolver.cached(acme.id)).toEqual(acme);
    expect(resolver.cached('cus_nobody')).toBeUndefined();
    expect(await resolver.fetch('cus_nobody')).toBeNull();
    expect(resolver.cached('cus_nobody')).toBeNull();
    expect(w.asked).toEqual([acme.id, 'cus_nobody']);
  });

  it("answers API_KEYS_FILE's customers without the store, cached or fetched", async () => {
    const filed = customer('Filed');
    const w = watched(await storeWith());
    const resolver = new CustomerResolver(w.store, [filed], OPTIONS);
    expect(resolver.cached(filed.id)).toBe(filed);
    expect(await resolver.fetch(filed.id)).toBe(filed);
    resolver.evict(filed.id);
    expect(resolver.cached(filed.id)).toBe(filed);
    expect(w.asked).toEqual([]);
  });

  it('asks the store once for concurrent misses of one customer, and again for a fetch after they settle', async () => {
    const acme = customer('Acme');
    const store = await storeWith(acme);
    const w = watched(store);
    const resolver = new CustomerResolver(w.store, [], OPTIONS);
    const both = await Promise.all([resolver.fetch(acme.id), resolver.fetch(acme.id)]);
    expect(both).toEqual([acme, acme]);
    expect(w.asked).toEqual([acme.id]);
    // A change evicts it; the next fetch reads the store as it stands, not the settled lookup.
    await store.update(acme.id, { name: 'Acme Ltd' }, new Date(NOW + 1));
    resolver.evict(acme.id);
    expect(resolver.cached(acme.id)).toBeUndefined();
    expect((await resolver.fetch(acme.id))?.name).toBe('Acme Ltd');
    expect(resolver.cached(acme.id)?.name).toBe('Acme Ltd');
    expect(w.asked).toEqual([acme.id, acme.id]);
  });

  it('holds at most maxEntries customers, the least recently used falling out first', async () => {
    const [a, b, c] = [customer('A'), customer('B'), customer('C')];
    const w = watched(await storeWith(a, b, c));
    const resolver = new CustomerResolver(w.store, [], { maxEntries: 2, ttlMs: 60_000 });
    await resolver.fetch(a.id);
    await resolver.fetch(b.id);
    expect(resolver.cached(a.id)).toEqual(a); // A is now the most recently used.
    await resolver.fetch(c.id);
    expect(resolver.cached(b.id)).toBeUndefined();
    expect(resolver.cached(a.id)).toEqual(a);
    expect(resolver.cached(c.id)).toEqual(c);
  });

  it('does not cache a lookup an eviction overtook: it may hold the customer as it was', async () => {
    const acme = customer('Acme');
    const store = await storeWith(acme);
    const w = watched(store);
    const resolver = new CustomerResolver(w.store, [], OPTIONS);
    w.hold();
    const lookup = resolver.fetch(acme.id);
    resolver.evict(acme.id);
    w.release();
    expect(await lookup).toEqual(acme);
    expect(resolver.cached(acme.id)).toBeUndefined();
    // With no eviction in between, the next lookup is cached.
    await resolver.fetch(acme.id);
    expect(resolver.cached(acme.id)).toEqual(acme);
  });
});
