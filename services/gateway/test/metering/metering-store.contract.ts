import { afterEach, describe, expect, it, vi } from 'vitest';
import type { HourTotals } from '../../src/metering/metering-event.js';
import { BadCursorError, cursorOf, type MeteringStore } from '../../src/metering/metering-store.js';
import { HOUR_MS } from '../../src/usage/usage-history.js';

export interface MeteringHarness {
  /** Two handles on one store, as two replicas would have (memory: the same object). */
  stores: [MeteringStore, MeteringStore];
  cleanup(): Promise<void>;
}

const HOUR = Date.UTC(2026, 10, 26, 13);
let counter = 0;
const subject = () => `cus_metering${process.pid}x${counter++}`;

function totals(id: string, units: number, routes: Record<string, number>, hour = HOUR): HourTotals {
  return { subject: id, hour, units, routes };
}

/** What both metering stores must do alike: each revision once, in order, behind opaque cursors. */
export function meteringStoreContract(name: string, make: () => Promise<MeteringHarness>): void {
  describe(`${name} metering store contract`, () => {
    let harness: MeteringHarness | undefined;
    const start = async () => {
      harness = await make();
      return harness.stores;
    };
    afterEach(async () => {
      await harness?.cleanup();
      harness = undefined;
    });

    it('appends an hour once however many replicas record the same totals at once', async () => {
      const [a, b] = await start();
      const id = subject();
      const hour = totals(id, 7, { 'GET /v1/pets': 2, 'POST /v1/pets': 5 });
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).record(hour, HOUR)));
      expect(results.filter((r) => r !== null)).toEqual([{ revision: 1, delta: 7 }]);
      const page = await a.read(null, 100);
      expect(page.records.filter((r) => r.subject === id)).toMatchObject([
        { subject: id, hour: HOUR, units: 7, routes: { 'GET /v1/pets': 2, 'POST /v1/pets': 5 }, revision: 1, delta: 7 },
      ]);
    });

    it('grants a claimed name to exactly one of the replicas claiming it at once, until it lapses', async () => {
      const [a, b] = await start();
      const name = `pass:${subject()}`;
      const claims = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).claim(name, 60_000)));
      expect(claims.filter(Boolean)).toHaveLength(1);
      expect(await a.claim(name, 60_000)).toBe(false);
      expect(await b.claim(`${name}:next`, 60_000)).toBe(true);
      const brief = `${name}:brief`;
      expect(await a.claim(brief, 1)).toBe(true);
      await vi.waitFor(async () => expect(await b.claim(brief, 60_000)).toBe(true), { timeout: 2_000, interval: 5 });
    });

    it('makes changed totals the next revision of the same hour, with what changed as the delta', async () => {
      const [a, b] = await start();
      const id = subject();
      await a.record(totals(id, 7, { 'GET /v1/pets': 7 }), HOUR);
      expect(await b.record(totals(id, 7, { 'GET /v1/pets': 7 }), HOUR + 1)).toBeNull();
      expect(await b.record(totals(id, 5, { 'GET /v1/pets': 5 }), HOUR + 2)).toEqual({ revision: 2, delta: -2 });
      expect(await a.record(totals(id, 5, { 'GET /v1/pets': 4, 'POST /v1/pets': 1 }), HOUR + 3)).toEqual({
        revision: 3,
        delta: 0,
      });
      const mine = (await a.read(null, 100)).records.filter((r) => r.subject === id);
      expect(mine.map((r) => [r.hour, r.revision, r.units, r.delta])).toEqual([
        [HOUR, 1, 7, 7],
        [HOUR, 2, 5, -2],
        [HOUR, 3, 5, 0],
      ]);
    });

    it('tells revisions by units and routes alone: routes in another order or at 0 make none; each subject its own', async () => {
      const [a, b] = await start();
      const [id, other] = [subject(), subject()];
      expect(await a.record(totals(id, 7, { 'GET /v1/pets': 2, 'POST /v1/pets': 5 }), HOUR)).toEqual({
        revision: 1,
        delta: 7,
      });
      expect(await b.record(totals(id, 7, { 'POST /v1/pets': 5, 'GET /v1/pets': 2 }), HOUR)).toBeNull();
      expect(
        await b.record(totals(id, 7, { 'DELETE /v1/pets': 0, 'GET /v1/pets': 2, 'POST /v1/pets': 5 }), HOUR),
      ).toBeNull();
      expect(await a.record(totals(id, 7, { 'GET /v1/pets': 5, 'POST /v1/pets': 2 }), HOUR)).toEqual({
        revision: 2,
        delta: 0,
      });
      expect(await b.record(totals(other, 3, { 'GET /v1/pets': 3 }), HOUR)).toEqual({ revision: 1, delta: 3 });
    });

    it('skips an hour with nothing to bill, until it had something', async () => {
      const [a] = await start();
      const id = subject();
      expect(await a.record(totals(id, 0, {}), HOUR)).toBeNull();
      expect(await a.record(totals(id, 3, { 'GET /v1/pets': 3 }), HOUR)).toEqual({ revision: 1, delta: 3 });
      expect(await a.record(totals(id, 0, {}), HOUR)).toEqual({ revision: 2, delta: -3 });
    });

    it('pages in record order from an opaque cursor, and a cursor past the end stays there', async () => {
      const [a, b] = await start();
      const id = subject();
      for (let i = 0; i < 5; i++) await (i % 2 ? a : b).record(totals(id, i + 1, {}, HOUR + i * HOUR_MS), HOUR);
      const seen: number[] = [];
      let after: string | null = null;
      for (let pages = 0; pages < 10; pages++) {
        const page = await b.read(after, 2);
        expect(page.records.length).toBeLessThanOrEqual(2);
        if (page.records.length === 0) {
          expect(page.next).toBe(after);
          break;
        }
        seen.push(...page.records.filter((r) => r.subject === id).map((r) => r.units));
        after = page.next;
      }
      expect(seen).toEqual([1, 2, 3, 4, 5]);
    });

    it('gives an empty export no cursor, and pages past ten records', async () => {
      const [a] = await start();
      expect(await a.read(null, 10)).toEqual({ records: [], next: null });
      const id = subject();
      for (let i = 0; i < 12; i++) await a.record(totals(id, i + 1, {}, HOUR + i * HOUR_MS), HOUR);
      const seen: number[] = [];
      let after: string | null = null;
      for (let pages = 0; pages < 4; pages++) {
        const page: Awaited<ReturnType<MeteringStore['read']>> = await a.read(after, 5);
        seen.push(...page.records.map((r) => r.units));
        after = page.next;
      }
      expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    });

    it('refuses a cursor it did not give', async () => {
      const [a] = await start();
      for (const cursor of [
        'nope',
        cursorOf('x-1'),
        cursorOf('x1-0'),
        cursorOf('1-0x'),
        Buffer.from('m1:12').toString('base64url'),
        `${cursorOf('1-0')}=`,
      ]) {
        await expect(a.read(cursor, 10), cursor).rejects.toBeInstanceOf(BadCursorError);
      }
    });
  });
}
