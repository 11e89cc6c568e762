// node --expose-gc bench/key-cache-memory.mjs [ENTRIES]: the heap one cached key costs the gateway.
// Fills the gateway's own KeyResolver (its LRU of resolved keys, KEY_CACHE_MAX entries) from a key
// store of records made by the product's key factory, and prints JSON with the heap used per
// entry, measured after full collections. A process's RSS moves with the collector's slack and
// says little per key; run in its own process by `npm run bench`.
import { createKey } from '@animal-store/gateway/keys/create-key.js';
import { KeyResolver } from '@animal-store/gateway/keys/key-resolver.js';
import { MemoryKeyStore } from '@animal-store/gateway/keys/memory-key-store.js';

if (typeof globalThis.gc !== 'function') throw new Error('run with node --expose-gc');
const entries = Number(process.argv[2] ?? 50_000);

const store = new MemoryKeyStore();
const hashes = [];
for (let i = 0; i < entries; i++) {
  const { record } = createKey({ plan: 'enterprise', name: `bench ${i}`, limits: { perMinute: 1e9, perDay: 1e9 } });
  await store.insert(record);
  hashes.push(record.sha256);
}
// Each lookup answers a new record, as a MongoDB store does, so each entry holds its own copy.
const fresh = { findByHash: async (sha256) => structuredClone(await store.findByHash(sha256)) };
const resolver = new KeyResolver(fresh, [], { maxEntries: entries, positiveTtlMs: 600_000, negativeTtlMs: 60_000 });

const heap = () => {
  globalThis.gc();
  globalThis.gc();
  return process.memoryUsage().heapUsed;
};
const before = heap();
for (const sha256 of hashes) await resolver.fetch(sha256);
const after = heap();
if (resolver.cached(hashes[0]) === undefined) throw new Error('the resolver kept nothing');
process.stdout.write(`${JSON.stringify({ entries, bytesPerEntry: Math.round((after - before) / entries) })}\n`);
