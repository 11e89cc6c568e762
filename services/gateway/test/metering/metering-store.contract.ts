import { afterEach, describe, expect, it, vi } from 'vitest';
import { meteringEvents } from '../../src/admin/routes/metering-events.js';
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

    // Stripe adds a customer's meter events up: each revision must reach it as its change, never
    // its new total, or a corrected hour is billed twice (issue 51).
    it('gives Stripe revision 1 as the hour’s units and each correction, up or down, as its change', async () => {
      const [a, b] = await start();
      const id = subject();
      const stripeId = `cus_Stripe${counter}`;
      const billed = (units: number, routes: Record<string, number>, hour = HOUR) => ({
        ...totals(id, units, routes, hour),
        externalId: stripeId,
      });
      const next = HOUR + HOUR_MS;
      expect(await a.record(billed(5, { 'GET /v1/pets': 5 }), HOUR)).toEqual({ revision: 1, delta: 5 });
      // The next hour, from the first's end: an hour of its own, with its own revision 1.
      expect(await b.record(billed(1, { 'GET /v1/pets': 1 }, next), HOUR)).toEqual({ revision: 1, delta: 1 });
      expect(await b.record(billed(9, { 'GET /v1/pets': 4, 'POST /v1/pets': 5 }), HOUR + 1)).toEqual({
        revision: 2,
        delta: 4,
      });
      // Units moved between routes only: a revision, but nothing for Stripe to add.
      expect(await a.record(billed(9, { 'GET /v1/pets': 9 }), HOUR + 2)).toEqual({ revision: 3, delta: 0 });
      expect(await a.record(billed(2, { 'GET /v1/pets': 2 }), HOUR + 3)).toEqual({ revision: 4, delta: -7 });
      expect(await b.record(billed(0, {}), HOUR + 4)).toEqual({ revision: 5, delta: -2 });
      expect(await b.record(billed(3, { 'GET /v1/pets': 3 }), HOUR + 5)).toEqual({ revision: 6, delta: 3 });

      const page = await meteringEvents(b, { format: 'stripe-meter-events', limit: 1000 }, 'api_units');
      const mine = page.events.flatMap((e) =>
        'payload' in e && e.payload.stripe_customer_id === stripeId
          ? [[e.identifier, e.payload.value, e.timestamp]]
          : [],
      );
      const iso = (hour: number) => new Date(hour).toISOString();
      expect(mine).toEqual([
        [`${id}/${iso(HOUR)}/1`, '5', HOUR / 1000],
        [`${id}/${iso(next)}/1`, '1', next / 1000],
        [`${id}/${iso(HOUR)}/2`, '4', HOUR / 1000],
        [`${id}/${iso(HOUR)}/4`, '-7', HOUR / 1000],
        [`${id}/${iso(HOUR)}/5`, '-2', HOUR / 1000],
        [`${id}/${iso(HOUR)}/6`, '3', HOUR / 1000],
      ]);
      // What Stripe bills for each hour, the sum of its events, is the hour's last total.
      const billedFor = (hour: number) =>
        mine.filter(([, , ts]) => ts === hour / 1000).reduce((sum, [, value]) => sum + Number(value), 0);
      expect([billedFor(HOUR), billedFor(next)]).toEqual([3, 1]);
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
