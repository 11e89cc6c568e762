import { describe, expect, it, vi } from 'vitest';
import type { IdempotencyStore } from '../../src/idempotency/idempotency-store.js';

/** What every IdempotencyStore must do; `make` gives a fresh, empty store. */
export function idempotencyStoreContract(name: string, make: () => Promise<IdempotencyStore>): void {
  describe(`${name} (IdempotencyStore contract)`, () => {
    it('keeps the first claim and answers it to every later one', async () => {
      const store = await make();
      expect(await store.claim('k', 'first', 60_000)).toBeNull();
      expect(await store.claim('k', 'second', 60_000)).toBe('first');
      expect(await store.claim('other', 'third', 60_000)).toBeNull();
    });

    it('gives one claim of many at once', async () => {
      const store = await make();
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => store.claim('k', `v${i}`, 60_000)));
      expect(answers.filter((a) => a === null)).toHaveLength(1);
      const kept = await store.claim('k', 'late', 60_000);
      expect(answers.filter((a) => a !== null).every((a) => a === kept)).toBe(true);
    });

    it('replaces only what it is told is there, and only once for many at once', async () => {
      const store = await make();
      await store.claim('k', 'pending', 60_000);
      expect(await store.replace('k', 'other', 'done')).toBe(false);
      expect(await store.replace('missing', 'pending', 'done')).toBe(false);
      const replaced = await Promise.all(Array.from({ length: 10 }, () => store.replace('k', 'pending', 'done')));
      expect(replaced.filter(Boolean)).toHaveLength(1);
      expect(await store.claim('k', 'again', 60_000)).toBe('done');
    });

    it('forgets a record once its time is up', async () => {
      const store = await make();
      expect(await store.claim('k', 'first', 30)).toBeNull();
      // A claim while it is kept changes nothing, so asking until one is taken waits for the expiry.
      await vi.waitFor(async () => expect(await store.claim('k', 'second', 60_000)).toBeNull(), { interval: 10 });
      expect(await store.claim('k', 'third', 60_000)).toBe('second');
    });
  });
}
