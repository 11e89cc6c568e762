import { describe, expect, it } from 'vitest';
import type { LeakRecord, LeakStore } from '../../src/leaks/leak-store.js';
import { LEAKS_KEPT } from '../../src/leaks/leak-store.js';
import type { ReplayGuard } from '../../src/leaks/replay-guard.js';

const leak = (n: number, customerId?: string): LeakRecord => ({
  id: `leak_${n}`,
  keyId: `key_${n}`,
  ...(customerId ? { customerId } : {}),
  reporter: 'manual',
  source: 'ticket',
  reportedAt: new Date(1_800_000_000_000 + n * 1000).toISOString(),
  response: 'notify',
  secret: 'current',
});

/** What every LeakStore must do; `make` gives a fresh, empty one. */
export function leakStoreContract(name: string, make: () => Promise<LeakStore>): void {
  describe(`${name} (LeakStore contract)`, () => {
    it('lists reports newest first, at most the limit asked, each as it was added', async () => {
      const store = await make();
      for (let n = 1; n <= 3; n++) await store.add(leak(n));
      expect(await store.list(2)).toEqual([leak(3), leak(2)]);
      expect(await store.list(0)).toEqual([]);
    });

    it('finds the reports of one customer’s keys only', async () => {
      const store = await make();
      await store.add(leak(1, 'cus_a'));
      await store.add(leak(2, 'cus_b'));
      await store.add(leak(3, 'cus_a'));
      await store.add(leak(4));
      expect(await store.ofCustomer('cus_a')).toEqual([leak(3, 'cus_a'), leak(1, 'cus_a')]);
      expect(await store.ofCustomer('cus_c')).toEqual([]);
    });

    it('gives a kept successor secret once, and none once its time is over', async () => {
      const store = await make();
      await store.keepSuccessor('leak_1', 'ask_successor', Date.now() + 60_000);
      await store.keepSuccessor('leak_2', 'ask_gone', Date.now() - 1);
      expect(await store.takeSuccessor('leak_1')).toBe('ask_successor');
      expect(await store.takeSuccessor('leak_1')).toBeNull();
      expect(await store.takeSuccessor('leak_2')).toBeNull();
      expect(await store.takeSuccessor('leak_3')).toBeNull();
    });

    it(`keeps the newest ${LEAKS_KEPT}`, async () => {
      const store = await make();
      for (let n = 0; n <= LEAKS_KEPT; n++) await store.add(leak(n));
      const all = await store.list(LEAKS_KEPT + 10);
      expect(all).toHaveLength(LEAKS_KEPT);
      expect(all.at(-1)).toEqual(leak(1));
    });
  });
}

/** What every ReplayGuard must do; `make` gives a fresh, empty one. */
export function replayGuardContract(name: string, make: () => Promise<ReplayGuard>): void {
  describe(`${name} (ReplayGuard contract)`, () => {
    it('takes a signature once within the window, each signature apart', async () => {
      const guard = await make();
      expect(await guard.firstSeen('sig-a', 60_000)).toBe(true);
      expect(await guard.firstSeen('sig-a', 60_000)).toBe(false);
      expect(await guard.firstSeen('sig-b', 60_000)).toBe(true);
    });

    it('takes a forgotten signature again', async () => {
      const guard = await make();
      await guard.firstSeen('sig-c', 60_000);
      await guard.forget('sig-c');
      expect(await guard.firstSeen('sig-c', 60_000)).toBe(true);
    });
  });
}
