import { afterEach, describe, expect, it } from 'vitest';
import { DAY_MS, daysTouched, HOUR_MS, type UsageHistory } from '../../src/usage/usage-history.js';

/**
 * How long before its end a test still expects an hour kept. Redis's clock runs on while the test
 * clock stands still between moves, so an hour whose hash expires at the end of its day (the last
 * hour of a UTC day) and is read a millisecond before it would be gone by the time the read
 * arrives; a minute is more than any run takes and far less than any wrong expiry would be off.
 */
const STILL_KEPT_MARGIN_MS = 60_000;
export interface HistoryHarness {
  history: UsageHistory;
  /** The history's clock: 10:20 UTC on some day, or now (Redis, whose clock must agree), until moved. */
  now(): number;
  /** Moves the clock on, and with it what the store lets expire (Redis: its TTLs). */
  advance(ms: number): Promise<void>;
  cleanup(): Promise<void>;
}

const RETENTION_MS = 3 * DAY_MS;
let counter = 0;
const newKeyId = () => `key_history_${process.pid}_${counter++}`;
const newCustomerId = () => `cus_history${process.pid}x${counter++}`;

/** What both usage histories must do alike: UTC hours in, the same hours and keys out. */
export function usageHistoryContract(name: string, make: (retentionMs: number) => Promise<HistoryHarness>): void {
  describe(`${name} usage history contract`, () => {
    let harness: HistoryHarness | undefined;
    const start = async () => {
      harness = await make(RETENTION_MS);
      return harness;
    };
    afterEach(async () => {
      await harness?.cleanup();
      harness = undefined;
    });

    it('counts each outcome and the units in the UTC hour of each decision, hours oldest first', async () => {
      const { history, now } = await start();
      const key = newKeyId();
      const hour = now() - (now() % HOUR_MS);
      history.count(key, 'admitted', 3, hour + 5);
      history.count(key, 'admitted', 2, hour + HOUR_MS - 1);
      history.count(key, 'limited', 0, hour);
      history.count(key, 'banned', 0, hour - 1);
      history.count(key, 'forbidden', 0, hour - HOUR_MS);
      history.count(newKeyId(), 'admitted', 1, hour);
      await history.flush();
      expect(await history.hours(key, hour - 2 * HOUR_MS, hour + HOUR_MS)).toEqual([
        {
          hour: hour - HOUR_MS,
          admitted: 0,
          limited: 0,
          banned: 1,
          outOfCredits: 0,
          forbidden: 1,
          units: 0,
          upstreamFailed: 0,
        },
        { hour, admitted: 2, limited: 1, banned: 0, outOfCredits: 0, forbidden: 0, units: 5, upstreamFailed: 0 },
      ]);
    });

    it('reports an admission the upstream did not serve as upstreamFailed, not admitted, and bills none of its units', async () => {
      const { history, now } = await start();
      const [key, orphan] = [newKeyId(), newKeyId()];
      const hour = now() - (now() % HOUR_MS);
      history.count(key, 'admitted', 5, hour + 10);
      history.count(key, 'admitted', 1, hour + 20);
      history.upstreamFailed(key, 5, hour + 10);
      // A failure counted without its admission (that one in the hour before, a millisecond earlier) is never below zero.
      history.upstreamFailed(orphan, 2, hour);
      await history.flush();
      expect(await history.hours(key, hour, hour + HOUR_MS)).toEqual([
        { hour, admitted: 1, limited: 0, banned: 0, outOfCredits: 0, forbidden: 0, units: 1, upstreamFailed: 1 },
      ]);
      expect(await history.hours(orphan, hour, hour + HOUR_MS)).toEqual([
        { hour, admitted: 0, limited: 0, banned: 0, outOfCredits: 0, forbidden: 0, units: 0, upstreamFailed: 1 },
      ]);
    });

    it('takes a decision back out of the hour it was counted in: for a key, and a key of a customer', async () => {
      const { history, now } = await start();
      const [key, customer] = [newKeyId(), newCustomerId()];
      const hour = now() - (now() % HOUR_MS);
      history.count(key, 'admitted', 3, hour + 5);
      history.count(key, 'admitted', 2, hour + 6);
      history.count(key, 'limited', 0, hour + 7);
      history.count(key, 'admitted', 4, hour + 8, 0, customer);
      // Flushed between: a decision is taken back after it was written, as the limiter learns late.
      await history.flush();
      history.uncount(key, 'admitted', 2, hour + 6);
      history.uncount(key, 'limited', 0, hour + 7);
      history.uncount(key, 'admitted', 4, hour + 8, 0, customer);
      await history.flush();
      const empty = { limited: 0, banned: 0, outOfCredits: 0, forbidden: 0, upstreamFailed: 0 };
      expect(await history.hours(key, hour, hour + HOUR_MS)).toEqual([{ hour, ...empty, admitted: 1, units: 3 }]);
      expect(await history.hours(key, hour, hour + HOUR_MS, customer)).toEqual([
        { hour, ...empty, admitted: 1, units: 3 },
      ]);
    });

    it('keeps served units by route in the hour of their admission, beside the counts and apart from them', async () => {
      const { history, now } = await start();
      const customer = newCustomerId();
      const hour = now() - (now() % HOUR_MS);
      history.count(customer, 'admitted', 1, hour + 5);
      history.count(customer, 'admitted', 5, hour + 6);
      history.served(customer, 'GET /v1/pets', 1, hour + 5);
      history.served(customer, 'POST /v1/pets', 5, hour + 6);
      history.served(customer, 'POST /v1/pets', 5, hour - 1);
      history.served(newCustomerId(), 'GET /v1/pets', 1, hour);
      await history.flush();
      expect(await history.routeHours(customer, hour - HOUR_MS, hour + HOUR_MS)).toEqual([
        { hour: hour - HOUR_MS, routes: { 'POST /v1/pets': 5 } },
        { hour, routes: { 'GET /v1/pets': 1, 'POST /v1/pets': 5 } },
      ]);
      expect(await history.routeHours(customer, hour, hour + HOUR_MS)).toEqual([
        { hour, routes: { 'GET /v1/pets': 1, 'POST /v1/pets': 5 } },
      ]);
      // The counts read as before: the route fields are not counts.
      expect(await history.hours(customer, hour - HOUR_MS, hour + HOUR_MS)).toEqual([
        { hour, admitted: 2, limited: 0, banned: 0, outOfCredits: 0, forbidden: 0, units: 6, upstreamFailed: 0 },
      ]);
    });

    it('reads the hours from `from` up to, not including, `to`, across days', async () => {
      const { history, now } = await start();
      const key = newKeyId();
      const midnight = now() - (now() % DAY_MS);
      for (const at of [midnight - HOUR_MS, midnight, midnight + HOUR_MS, midnight + 2 * HOUR_MS]) {
        history.count(key, 'admitted', 1, at + 30_000);
      }
      const hours = await history.hours(key, midnight - HOUR_MS, midnight + 2 * HOUR_MS);
      expect(hours.map((h) => h.hour)).toEqual([midnight - HOUR_MS, midnight, midnight + HOUR_MS]);
      expect(await history.hours(key, midnight, midnight + HOUR_MS)).toEqual([
        {
          hour: midnight,
          admitted: 1,
          limited: 0,
          banned: 0,
          outOfCredits: 0,
          forbidden: 0,
          units: 1,
          upstreamFailed: 0,
        },
      ]);
      expect(await history.hours(newKeyId(), midnight - DAY_MS, midnight + DAY_MS)).toEqual([]);
    });

    it('knows which keys decided anything on the UTC days a range touches', async () => {
      const { history, now } = await start();
      const [early, late, both] = [newKeyId(), newKeyId(), newKeyId()];
      const midnight = now() - (now() % DAY_MS);
      history.count(early, 'forbidden', 0, midnight - 1);
      history.count(late, 'limited', 0, midnight);
      history.count(both, 'admitted', 1, midnight - DAY_MS);
      history.count(both, 'admitted', 1, midnight + HOUR_MS);
      await history.flush();
      const sorted = async (from: number, to: number) => (await history.activeKeys(from, to)).sort();
      expect(await sorted(midnight - HOUR_MS, midnight)).toEqual([both, early].sort());
      expect(await sorted(midnight, midnight + 1)).toEqual([both, late].sort());
      expect(await sorted(midnight - 1, midnight + 1)).toEqual([both, early, late].sort());
      expect(await sorted(midnight + DAY_MS, midnight + 2 * DAY_MS)).toEqual([]);
    });

    it("keeps a customer's hours under its id, and lists it among the active customers, never the keys", async () => {
      const { history, now } = await start();
      const [customer, other, key] = [newCustomerId(), newCustomerId(), newKeyId()];
      const midnight = now() - (now() % DAY_MS);
      history.count(customer, 'admitted', 4, midnight + HOUR_MS);
      history.count(customer, 'limited', 0, midnight + HOUR_MS + 1);
      history.count(key, 'admitted', 1, midnight + HOUR_MS);
      history.count(other, 'admitted', 2, midnight - 1);
      await history.flush();
      expect(await history.hours(customer, midnight, midnight + DAY_MS)).toEqual([
        {
          hour: midnight + HOUR_MS,
          admitted: 1,
          limited: 1,
          banned: 0,
          outOfCredits: 0,
          forbidden: 0,
          units: 4,
          upstreamFailed: 0,
        },
      ]);
      const sorted = async (ids: Promise<string[]>) => (await ids).sort();
      expect(await sorted(history.activeCustomers(midnight, midnight + 1))).toEqual([customer]);
      expect(await sorted(history.activeCustomers(midnight - 1, midnight + 1))).toEqual([customer, other].sort());
      expect(await sorted(history.activeCustomers(midnight + DAY_MS, midnight + 2 * DAY_MS))).toEqual([]);
      expect(await history.activeKeys(midnight, midnight + 1)).toEqual([key]);
    });

    it('keeps the hours of a customer in a zone a part-hour off UTC from its local hour, across the UTC midnight', async () => {
      const { history, now } = await start();
      const [india, nepal] = [newCustomerId(), newCustomerId()];
      const midnight = now() - (now() % DAY_MS);
      const [half, quarter] = [30 * 60_000, 15 * 60_000];
      // India's hours run from :30 past the UTC hour: 00:10 UTC is in the hour from 23:30 the day before.
      history.count(india, 'admitted', 2, midnight - 31 * 60_000, half);
      history.count(india, 'admitted', 3, midnight - 29 * 60_000, half);
      history.count(india, 'admitted', 4, midnight + 10 * 60_000, half);
      history.upstreamFailed(india, 4, midnight + 10 * 60_000, half);
      history.count(india, 'limited', 0, midnight + 30 * 60_000, half);
      history.count(nepal, 'admitted', 1, midnight + 14 * 60_000, quarter);
      history.count(nepal, 'admitted', 1, midnight + 15 * 60_000, quarter);
      await history.flush();
      const empty = { admitted: 0, limited: 0, banned: 0, outOfCredits: 0, forbidden: 0, units: 0, upstreamFailed: 0 };
      expect(await history.hours(india, midnight - 2 * HOUR_MS, midnight + 2 * HOUR_MS)).toEqual([
        { ...empty, hour: midnight - HOUR_MS - half, admitted: 1, units: 2 },
        { ...empty, hour: midnight - half, admitted: 1, units: 3, upstreamFailed: 1 },
        { ...empty, hour: midnight + half, limited: 1 },
      ]);
      // An hour is read when it starts in the range.
      expect((await history.hours(india, midnight, midnight + DAY_MS)).map((h) => h.hour)).toEqual([midnight + half]);
      expect(await history.hours(nepal, midnight - DAY_MS, midnight + DAY_MS)).toEqual([
        { ...empty, hour: midnight - HOUR_MS + quarter, admitted: 1, units: 1 },
        { ...empty, hour: midnight + quarter, admitted: 1, units: 1 },
      ]);
      // Active on the UTC day its hour starts in.
      expect(await history.activeCustomers(midnight - 1, midnight)).toContain(india);
      expect(await history.activeCustomers(midnight - 1, midnight)).toContain(nepal);
    });

    it('keeps a key’s hours as a customer’s apart from its own: read with the customer both are summed, without it its own alone', async () => {
      const { history, now } = await start();
      const [key, customer] = [newKeyId(), newCustomerId()];
      const hour = now() - (now() % HOUR_MS);
      // It stood for itself, then belonged to the customer in the same hour, then stood alone again.
      history.count(key, 'admitted', 2, hour + 1);
      history.count(key, 'admitted', 5, hour + 2, 0, customer);
      history.count(key, 'limited', 0, hour + 3, 0, customer);
      history.count(key, 'admitted', 1, hour + 4);
      await history.flush();
      const range = [hour, hour + HOUR_MS] as const;
      expect(await history.hours(key, ...range)).toEqual([
        { hour, admitted: 2, limited: 0, banned: 0, outOfCredits: 0, forbidden: 0, units: 3, upstreamFailed: 0 },
      ]);
      expect(await history.hours(key, ...range, customer)).toEqual([
        { hour, admitted: 3, limited: 1, banned: 0, outOfCredits: 0, forbidden: 0, units: 8, upstreamFailed: 0 },
      ]);
      // Active once, as a key, whichever slot its hours are in.
      expect(await history.activeKeys(...range)).toContain(key);
      expect((await history.activeKeys(...range)).filter((id) => id.includes(key))).toEqual([key]);
      expect(await history.activeCustomers(...range)).not.toContain(customer);
    });

    it('reads a key’s UTC hours and its local hours of a part-hour zone side by side', async () => {
      const { history, now } = await start();
      const key = newKeyId();
      const hour = now() - (now() % HOUR_MS);
      // The key stood alone (UTC hours), then joined a customer in India (hours from :30).
      history.count(key, 'admitted', 1, hour + 10 * 60_000);
      history.count(key, 'admitted', 1, hour + 40 * 60_000, 30 * 60_000);
      await history.flush();
      expect((await history.hours(key, hour - HOUR_MS, hour + HOUR_MS)).map((h) => [h.hour, h.admitted])).toEqual([
        [hour, 1],
        [hour + 30 * 60_000, 1],
      ]);
    });

    it('keeps a local hour that ends past its UTC day for the retention after it ends', async () => {
      const { history, now, advance } = await start();
      const key = newKeyId();
      const half = 30 * 60_000;
      const midnight = now() - (now() % DAY_MS) + DAY_MS;
      // The hour from 23:30 UTC, kept in that day's hash, ends at 00:30.
      history.count(key, 'admitted', 1, midnight + 10 * 60_000, half);
      await history.flush();
      const span = [midnight - DAY_MS, midnight + DAY_MS] as const;
      await advance(midnight + half + RETENTION_MS - STILL_KEPT_MARGIN_MS - now());
      expect(await history.hours(key, ...span)).toHaveLength(1);
      await advance(midnight + half + RETENTION_MS + 1 - now());
      expect(await history.hours(key, ...span)).toEqual([]);
    });

    it('keeps the days of active keys and customers as long as their hours, and forgets them after', async () => {
      const { history, now, advance } = await start();
      const [customer, key] = [newCustomerId(), newKeyId()];
      const dayStart = now() - (now() % DAY_MS);
      const hourEnd = now() - (now() % HOUR_MS) + HOUR_MS;
      history.count(customer, 'admitted', 1, now());
      history.count(key, 'admitted', 1, now());
      await history.flush();
      // Written off the request path (a turn later): let it land before the clock moves.
      await new Promise((resolve) => setImmediate(resolve));
      await expect.poll(() => history.activeCustomers(dayStart, dayStart + DAY_MS)).toEqual([customer]);
      await advance(hourEnd + RETENTION_MS - STILL_KEPT_MARGIN_MS - now());
      // Days later, a week's list still holds the first day: an index expiring with its day would not.
      const week = [dayStart, now()] as const;
      expect(await history.activeCustomers(...week)).toEqual([customer]);
      expect(await history.activeKeys(...week)).toEqual([key]);
      await advance(dayStart + DAY_MS + RETENTION_MS + 1 - now());
      expect(await history.activeCustomers(...week)).toEqual([]);
      expect(await history.activeKeys(...week)).toEqual([]);
    });

    it('keeps an hour for the retention after it ends, and forgets it once its day ended that long ago', async () => {
      const { history, now, advance } = await start();
      const key = newKeyId();
      const hourEnd = now() - (now() % HOUR_MS) + HOUR_MS;
      const dayEnd = now() - (now() % DAY_MS) + DAY_MS;
      history.count(key, 'admitted', 1, now());
      await history.flush();
      const span = [dayEnd - DAY_MS, dayEnd] as const;
      await advance(hourEnd + RETENTION_MS - STILL_KEPT_MARGIN_MS - now());
      expect(await history.hours(key, ...span)).toHaveLength(1);
      await advance(dayEnd + RETENTION_MS + 1 - now());
      expect(await history.hours(key, ...span)).toEqual([]);
    });
  });
}

describe('the UTC days a range touches', () => {
  it('are every day from the one holding `from` to the one holding the last instant before `to`', () => {
    expect(daysTouched(0, 1)).toEqual([0]);
    expect(daysTouched(DAY_MS - 1, DAY_MS)).toEqual([0]);
    expect(daysTouched(DAY_MS - 1, DAY_MS + 1)).toEqual([0, 1]);
    expect(daysTouched(3 * DAY_MS, 5 * DAY_MS)).toEqual([3, 4]);
    expect(daysTouched(DAY_MS, DAY_MS)).toEqual([]);
  });
});
