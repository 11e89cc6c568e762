import type { FastifyBaseLogger } from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CustomerRecord } from '../../src/customers/customer-store.js';
import type { KeyRecord } from '../../src/keys/key-store.js';
import { MeteringCloser } from '../../src/metering/closer.js';
import type { MeteringRecord } from '../../src/metering/metering-event.js';
import { MemoryMeteringStore } from '../../src/metering/metering-store.js';
import { DAY_MS, HOUR_MS, MemoryUsageHistory, type UsageHistory } from '../../src/usage/usage-history.js';

/*
 * The closer alone, on the memory history and store, with a clock the test moves: which hours a
 * pass reports and when, who is a subject, and the timer's turns. The gateway suite
 * (metering-events.test.ts) runs the same closer behind real traffic on two replicas.
 */

const H = Date.UTC(2026, 10, 26, 13);
const DELAY = 300_000;
const ROUTE = 'GET /v1/pets';

function setup(options: { closeDelayMs?: number; now?: () => number; history?: UsageHistory } = {}) {
  const clock = { at: H };
  const now = options.now ?? (() => clock.at);
  const history = new MemoryUsageHistory(30 * DAY_MS, now);
  const store = new MemoryMeteringStore();
  const keys = new Map<string, Pick<KeyRecord, 'id' | 'customerId'>>();
  const customers = new Map<string, Pick<CustomerRecord, 'id' | 'externalId'>>();
  const recorded: MeteringRecord[] = [];
  const warn = vi.fn();
  const closer = (closeDelayMs = options.closeDelayMs ?? DELAY) =>
    new MeteringCloser({
      history: options.history ?? history,
      store,
      customers: { get: async (id) => (customers.get(id) as CustomerRecord | undefined) ?? null },
      key: async (id) => (keys.get(id) as KeyRecord | undefined) ?? null,
      onRecorded: (record) => recorded.push(record),
      closeDelayMs,
      now,
      logger: { warn } as unknown as FastifyBaseLogger,
    });
  /** An admitted and served request, written as the limiter and the proxy write it. */
  const use = (keyId: string, units: number, at: number, route = ROUTE) => {
    const customerId = keys.get(keyId)?.customerId;
    history.count(keyId, 'admitted', units, at, 0, customerId);
    if (customerId !== undefined) history.count(customerId, 'admitted', units, at);
    history.served(customerId ?? keyId, route, units, at);
  };
  return { clock, history, store, keys, customers, recorded, warn, closer, use };
}

/** What a test reads of a record: its subject, hour, revision, units, delta and routes. */
const brief = (records: MeteringRecord[]) =>
  records.map((r) => [r.subject, r.hour, r.revision, r.units, r.delta, r.routes]);

describe('a closing pass', () => {
  it('closes an hour exactly its close delay after its end, and reads back 48 hours from there, no further', async () => {
    const t = setup();
    t.keys.set('key_lone', { id: 'key_lone' });
    t.use('key_lone', 2, H + 600_000);
    t.use('key_lone', 3, H - 47 * HOUR_MS + 1);
    t.use('key_lone', 4, H - 48 * HOUR_MS + 1);
    const closer = t.closer();
    t.clock.at = H + HOUR_MS + DELAY - 1;
    expect(brief(await closer.closeDue())).toEqual([['key_lone', H - 47 * HOUR_MS, 1, 3, 3, { [ROUTE]: 3 }]]);
    t.clock.at += 1;
    expect(brief(await closer.closeDue())).toEqual([['key_lone', H, 1, 2, 2, { [ROUTE]: 2 }]]);
    // A replica started now reads the same 48 hours: the hour before them is never reported.
    t.clock.at += HOUR_MS;
    expect(await t.closer().closeDue()).toEqual([]);
    expect(t.recorded.map((r) => r.hour)).toEqual([H - 47 * HOUR_MS, H]);
  });

  it('reports customers with their externalId and lone keys, not a customer’s key nor a key no store knows', async () => {
    const t = setup();
    t.customers.set('cus_striped', { id: 'cus_striped', externalId: 'cus_Stripe1' });
    t.customers.set('cus_plain', { id: 'cus_plain' });
    t.keys.set('key_striped', { id: 'key_striped', customerId: 'cus_striped' });
    t.keys.set('key_plain', { id: 'key_plain', customerId: 'cus_plain' });
    t.keys.set('key_lone', { id: 'key_lone' });
    t.use('key_striped', 3, H + 1);
    // The same totals as key_lone's: each subject's hour is its own.
    t.use('key_plain', 2, H + 2);
    t.use('key_lone', 2, H + 3);
    // A key the key store does not know (gone from API_KEYS_FILE): its hours are nobody's to bill.
    t.use('key_gone', 4, H + 4);
    // A refusal of a ban the replica knew is kept in the key's own hours, even for a key of a customer.
    t.history.count('key_striped', 'banned', 0, H + 5);
    t.clock.at = H + HOUR_MS + DELAY;
    const appended = await t.closer().closeDue();
    const bySubject = new Map(appended.map((r) => [r.subject, r]));
    expect([...bySubject.keys()].sort()).toEqual(['cus_plain', 'cus_striped', 'key_lone']);
    expect(bySubject.get('cus_striped')).toEqual({
      subject: 'cus_striped',
      hour: H,
      units: 3,
      routes: { [ROUTE]: 3 },
      externalId: 'cus_Stripe1',
      revision: 1,
      delta: 3,
      closedAt: t.clock.at,
    });
    expect(bySubject.get('cus_plain')).not.toHaveProperty('externalId');
    expect(bySubject.get('key_lone')).not.toHaveProperty('externalId');
    expect(t.recorded).toEqual(appended);
  });

  it('appends nothing on a replay, and makes a change to a closed hour its next revision, told once', async () => {
    const t = setup();
    t.keys.set('key_a', { id: 'key_a', customerId: 'cus_a' });
    t.use('key_a', 3, H + 1);
    // Admitted, no answer yet: units on no route.
    t.history.count('key_a', 'admitted', 5, H + 2, 0, 'cus_a');
    t.history.count('cus_a', 'admitted', 5, H + 2);
    const closer = t.closer();
    t.clock.at = H + HOUR_MS + DELAY;
    expect(brief(await closer.closeDue())).toEqual([['cus_a', H, 1, 8, 8, { [ROUTE]: 3, unattributed: 5 }]]);
    t.clock.at += 60_000;
    expect(await closer.closeDue()).toEqual([]);
    // The late answer, served on another route.
    t.history.served('cus_a', 'POST /v1/pets', 5, H + 2);
    t.clock.at += 60_000;
    expect(brief(await closer.closeDue())).toEqual([['cus_a', H, 2, 8, 0, { [ROUTE]: 3, 'POST /v1/pets': 5 }]]);
    expect(await t.closer().closeDue()).toEqual([]);
    expect(t.recorded.map((r) => r.revision)).toEqual([1, 2]);
  });

  it('runs one pass at a time: calls during a pass share it, a call after it passes again', async () => {
    const t = setup();
    t.keys.set('key_a', { id: 'key_a' });
    t.use('key_a', 1, H + 1);
    const closer = t.closer();
    t.clock.at = H + HOUR_MS + DELAY;
    const [one, two] = await Promise.all([closer.closeDue(), closer.closeDue()]);
    expect(brief(one ?? [])).toEqual([['key_a', H, 1, 1, 1, { [ROUTE]: 1 }]]);
    expect(two).toEqual(one);
    t.use('key_a', 2, H + 2);
    expect(brief(await closer.closeDue())).toEqual([['key_a', H, 2, 3, 2, { [ROUTE]: 3 }]]);
  });

  // The keys of a customer are remembered as such (their own hours are not read again) until the
  // pass an hour after the one that cleared the memory last.
  it('reports a key that left its customer as itself within the hour, not before its customer’s keys are forgotten', async () => {
    const t = setup();
    t.keys.set('key_a', { id: 'key_a', customerId: 'cus_a' });
    t.use('key_a', 3, H + 600_000);
    t.history.count('key_a', 'banned', 0, H + 600_000);
    const closer = t.closer();
    const first = H + HOUR_MS + 30 * 60_000;
    t.clock.at = first;
    expect(brief(await closer.closeDue())).toEqual([['cus_a', H, 1, 3, 3, { [ROUTE]: 3 }]]);
    t.keys.set('key_a', { id: 'key_a' });
    t.use('key_a', 2, H + HOUR_MS + 40 * 60_000);
    // Its lone hour closed at 35 minutes past the first pass.
    t.clock.at = first + 35 * 60_000;
    expect(await closer.closeDue()).toEqual([]);
    t.clock.at = first + HOUR_MS - 1;
    expect(await closer.closeDue()).toEqual([]);
    t.clock.at = first + HOUR_MS;
    expect(brief(await closer.closeDue())).toEqual([['key_a', H + HOUR_MS, 1, 2, 2, { [ROUTE]: 2 }]]);
  });
});

describe('the closer’s turns', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('passes when a quarter hour of UTC has passed its close delay, once per quarter and per store', async () => {
    const t = setup();
    t.keys.set('key_a', { id: 'key_a' });
    t.use('key_a', 1, H + 1);
    const [a, b] = [t.closer(), t.closer()];
    t.clock.at = H + HOUR_MS + DELAY - 1;
    expect(await a.tick()).toEqual([]);
    t.clock.at += 1;
    expect(brief(await a.tick())).toEqual([['key_a', H, 1, 1, 1, { [ROUTE]: 1 }]]);
    t.use('key_a', 1, H + 2);
    // The same quarter: neither replica passes again, so the change waits.
    t.clock.at += 15 * 60_000 - 1;
    expect(await a.tick()).toEqual([]);
    expect(await b.tick()).toEqual([]);
    t.clock.at += 1;
    const turns = await Promise.all([b.tick(), a.tick()]);
    expect(turns.map(brief)).toEqual([[['key_a', H, 2, 2, 1, { [ROUTE]: 2 }]], []]);
  });

  it('turns every minute, or every close delay when shorter, but at most once a second', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setInterval', 'clearInterval'] });
    for (const [closeDelayMs, every] of [
      [DELAY, 60_000],
      [5_000, 5_000],
      [200, 1_000],
    ] as const) {
      // The first turn comes just after the hour has closed.
      vi.setSystemTime(H + HOUR_MS + closeDelayMs - every / 2);
      const t = setup({ closeDelayMs, now: Date.now });
      t.keys.set('key_a', { id: 'key_a' });
      t.use('key_a', 1, H + 1);
      const closer = t.closer();
      closer.start();
      await vi.advanceTimersByTimeAsync(every - 1);
      expect(t.recorded, `close delay ${closeDelayMs}`).toEqual([]);
      await vi.advanceTimersByTimeAsync(1);
      expect(brief(t.recorded), `close delay ${closeDelayMs}`).toEqual([['key_a', H, 1, 1, 1, { [ROUTE]: 1 }]]);
      await closer.stop();
    }
  });

  it('stops turning on stop(), however often it was started, and logs a turn that failed', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setInterval', 'clearInterval'] });
    vi.setSystemTime(H + HOUR_MS + DELAY);
    let failing = true;
    const base = new MemoryUsageHistory(30 * DAY_MS, Date.now);
    const history = Object.assign(Object.create(base) as UsageHistory, {
      activeKeys: (from: number, to: number) =>
        failing ? Promise.reject(new Error('history away')) : base.activeKeys(from, to),
    });
    const t = setup({ now: Date.now, history });
    t.keys.set('key_a', { id: 'key_a' });
    base.count('key_a', 'admitted', 1, H + 1);
    const closer = t.closer();
    closer.start();
    closer.start();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(t.warn).toHaveBeenCalledTimes(1);
    expect(t.warn).toHaveBeenCalledWith({ err: new Error('history away') }, 'metering: a closing pass failed');
    failing = false;
    await closer.stop();
    await vi.advanceTimersByTimeAsync(60 * 60_000);
    expect(t.recorded).toEqual([]);
    expect(t.warn).toHaveBeenCalledTimes(1);
    // Started again, it turns again.
    closer.start();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(brief(t.recorded)).toEqual([['key_a', H, 1, 1, 1, { unattributed: 1 }]]);
    await closer.stop();
  });

  it('does not keep the process alive: its timer is unref’d', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const closer = setup().closer();
    const before = timers();
    closer.start();
    expect(timers()).toBe(before);
    await closer.stop();
    const held = setInterval(() => undefined, 60_000);
    expect(timers()).toBe(before + 1);
    clearInterval(held);
  });

  it('waits on stop() for the pass under way, and stops after a failed one', async () => {
    const t = setup();
    t.keys.set('key_a', { id: 'key_a' });
    t.use('key_a', 1, H + 1);
    t.clock.at = H + HOUR_MS + DELAY;
    const closer = t.closer();
    const pass = closer.closeDue();
    await closer.stop();
    expect(brief(t.recorded)).toEqual([['key_a', H, 1, 1, 1, { [ROUTE]: 1 }]]);
    await pass;

    const broken = Object.assign(Object.create(t.history) as UsageHistory, {
      activeCustomers: () => Promise.reject(new Error('history away')),
    });
    const failing = setup({ history: broken }).closer();
    const failed = failing.closeDue();
    await expect(failing.stop()).resolves.toBeUndefined();
    await expect(failed).rejects.toThrow('history away');
  });
});
