import { describe, expect, it } from 'vitest';
import { hashApiKey } from '../src/keys/api-key.js';
import { createKey } from '../src/keys/create-key.js';
import { KeyResolver } from '../src/keys/key-resolver.js';
import type { KeyRecord } from '../src/keys/key-store.js';
import { MemoryKeyStore } from '../src/keys/memory-key-store.js';

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

describe('KeyResolver', () => {
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
