import { describe, expect, it } from 'vitest';
import { generateApiKey, hashApiKey } from '../../src/keys/api-key.js';
import { createKey } from '../../src/keys/create-key.js';
import { KeyResolver } from '../../src/keys/key-resolver.js';
import type { KeyRecord, KeyStore } from '../../src/keys/key-store.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';

/** A memory store whose next findByHash reads at once but answers only when released. */
class HeldStore extends MemoryKeyStore {
  private held: { reached: () => void; released: Promise<void> } | undefined;

  /** `reached` settles when the held lookup has read the store; `release` lets it answer. */
  hold(): { reached: Promise<void>; release: () => void } {
    let release = () => {};
    let reached = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const arrived = new Promise<void>((resolve) => {
      reached = resolve;
    });
    this.held = { reached, released };
    return { reached: arrived, release };
  }

  override async findByHash(sha256: string): Promise<KeyRecord | null> {
    const record = await super.findByHash(sha256);
    const held = this.held;
    this.held = undefined;
    if (held) {
      held.reached();
      await held.released;
    }
    return record;
  }
}

/** A memory store that counts its lookups by hash, and fails them while `down`. */
class CountingStore extends MemoryKeyStore {
  lookups = 0;
  down = false;
  override async findByHash(sha256: string): Promise<KeyRecord | null> {
    this.lookups++;
    if (this.down) throw new Error('key store unreachable');
    return super.findByHash(sha256);
  }
}

const OPTIONS = { maxEntries: 100, positiveTtlMs: 60_000, negativeTtlMs: 60_000 };

/** A store call as the resolver reports it for the metrics. */
type StoreCall = [operation: string, seconds: number, ok: boolean];

function resolverOn(store: KeyStore, options: Partial<typeof OPTIONS> = {}, calls?: StoreCall[]): KeyResolver {
  return new KeyResolver(store, [], {
    ...OPTIONS,
    ...options,
    ...(calls ? { onStoreCall: (...call: StoreCall) => void calls.push(call) } : {}),
  });
}

describe('KeyResolver', () => {
  it("answers the keys file's keys, current and previous secret, without asking the store, and lists them", async () => {
    const store = new CountingStore();
    const { key, record } = createKey({ plan: 'business' });
    const old = generateApiKey();
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const fromFile: KeyRecord = { ...record, previous: { sha256: hashApiKey(old), expiresAt: later } };
    const resolver = new KeyResolver(store, [fromFile], OPTIONS);
    expect(resolver.cached(hashApiKey(key))).toMatchObject({ record: fromFile, secret: 'current' });
    expect(resolver.cached(hashApiKey(old))).toMatchObject({ secret: 'previous', endsAt: Date.parse(later) });
    expect(resolver.fileRecord(record.id)).toStrictEqual(fromFile);
    expect(resolver.fileRecords()).toStrictEqual([fromFile]);
    expect(store.lookups).toBe(0);
  });

  it('asks the store once about a key nobody issued, then knows it as unknown', async () => {
    const store = new CountingStore();
    const resolver = resolverOn(store);
    const sha256 = hashApiKey(generateApiKey());
    expect(resolver.cached(sha256)).toBeUndefined();
    expect(await resolver.fetch(sha256)).toBeNull();
    expect(resolver.cached(sha256)).toBeNull();
    expect(store.lookups).toBe(1);
  });

  it('remembers as many unknown keys as it may cache known ones, forgetting the oldest first', async () => {
    const store = new CountingStore();
    const resolver = resolverOn(store, { maxEntries: 2 });
    const unknown = Array.from({ length: 3 }, () => hashApiKey(generateApiKey()));
    for (const sha256 of unknown) expect(await resolver.fetch(sha256)).toBeNull();
    expect(unknown.map((sha256) => resolver.cached(sha256))).toEqual([undefined, null, null]);
  });

  it('asks the store once for concurrent lookups of one key', async () => {
    const store = new CountingStore();
    const { key, record } = createKey({ plan: 'pro' });
    await store.insert(record);
    const resolver = resolverOn(store);
    const sha256 = hashApiKey(key);
    const answers = await Promise.all([resolver.fetch(sha256), resolver.fetch(sha256), resolver.fetch(sha256)]);
    expect(answers.map((a) => a?.record.id)).toEqual([record.id, record.id, record.id]);
    expect(store.lookups).toBe(1);
  });

  it('reports each store call, in seconds, and passes on the store error of a failed one', async () => {
    const store = new CountingStore();
    const { key, record } = createKey({ plan: 'pro' });
    await store.insert(record);
    const calls: StoreCall[] = [];
    const resolver = resolverOn(store, {}, calls);
    const started = performance.now();
    await resolver.fetch(hashApiKey(key));
    store.down = true;
    await expect(resolver.fetch(hashApiKey(generateApiKey()))).rejects.toThrow('key store unreachable');
    const elapsed = (performance.now() - started) / 1000;
    expect(calls.map(([operation, , ok]) => [operation, ok])).toEqual([
      ['findByHash', true],
      ['findByHash', false],
    ]);
    // Each call's duration lies within the time the test itself saw pass.
    for (const [, seconds] of calls) {
      expect(seconds).toBeGreaterThanOrEqual(0);
      expect(seconds).toBeLessThanOrEqual(elapsed);
    }
    // Without a metrics observer, the store's own error still comes through.
    await expect(resolverOn(store).fetch(hashApiKey(generateApiKey()))).rejects.toThrow('key store unreachable');
  });

  it('forgets every cached secret of a changed key, also when the other one fell out of the cache', async () => {
    const store = new MemoryKeyStore();
    const { key: old, record } = createKey({ plan: 'pro' });
    await store.insert(record);
    const fresh = generateApiKey();
    const later = new Date(Date.now() + 3_600_000).toISOString();
    await store.rotate(record.id, { sha256: hashApiKey(fresh), previousExpiresAt: later }, new Date());
    const other = createKey({ plan: 'free' });
    await store.insert(other.record);
    const resolver = resolverOn(store, { maxEntries: 2 });
    expect((await resolver.fetch(hashApiKey(fresh)))?.secret).toBe('current');
    expect((await resolver.fetch(hashApiKey(old)))?.secret).toBe('previous');
    // A third key pushes the least recently used entry, the current secret, out.
    await resolver.fetch(hashApiKey(other.key));
    expect(resolver.cached(hashApiKey(fresh))).toBeUndefined();
    expect(resolver.cached(hashApiKey(old))?.secret).toBe('previous');

    resolver.evict(record.id);
    expect(resolver.cached(hashApiKey(old))).toBeUndefined();
    expect(resolver.cached(hashApiKey(other.key))?.record.id).toBe(other.record.id);
  });

  it('does not cache a record read before an eviction that overtook its lookup', async () => {
    const store = new HeldStore();
    const { key, record } = createKey({ plan: 'free', name: 'raced' });
    await store.insert(record);
    const resolver = new KeyResolver(store, [], { maxEntries: 100, positiveTtlMs: 60_000, negativeTtlMs: 60_000 });
    const sha256 = hashApiKey(key);

    const held = store.hold();
    const lookup = resolver.fetch(sha256);
    await held.reached;
    // The key changes while the lookup is out: the record it read is the old one.
    await store.update(record.id, { plan: 'pro' }, new Date());
    resolver.evict(record.id);
    held.release();

    expect((await lookup)?.record.plan).toBe('free');
    // Not remembered: the next request asks the store and sees the change.
    expect(resolver.cached(sha256)).toBeUndefined();
    expect((await resolver.fetch(sha256))?.record.plan).toBe('pro');
    expect(resolver.cached(sha256)?.record.plan).toBe('pro');
  });
});
