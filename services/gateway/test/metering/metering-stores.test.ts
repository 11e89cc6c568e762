import { randomUUID } from 'node:crypto';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meteringEvents } from '../../src/admin/routes/metering-events.js';
import { cloudEvent, type MeteringRecord, stripeMeterEvent } from '../../src/metering/metering-event.js';
import { BadCursorError, cursorOf, MemoryMeteringStore, positionOf } from '../../src/metering/metering-store.js';
import { RedisMeteringStore } from '../../src/metering/redis-metering-store.js';
import { DAY_MS, HOUR_MS } from '../../src/usage/usage-history.js';
import { connected, redisClient } from '../support/helpers.js';
import { meteringStoreContract } from './metering-store.contract.js';

let redis: TestRedis | undefined;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

meteringStoreContract('memory', async () => {
  const store = new MemoryMeteringStore();
  return { stores: [store, store], cleanup: async () => {} };
});

meteringStoreContract('redis', async () => {
  if (!redis) throw new Error('no Redis');
  const url = redis.url;
  const clients = await Promise.all([connected(redisClient(url, 2_000)), connected(redisClient(url, 2_000))]);
  const prefix = `mt${randomUUID().slice(0, 8)}:`;
  // Two clients, as two replicas: each defines the script on its own connection.
  const stores = clients.map((c) => new RedisMeteringStore(c, prefix, 400 * DAY_MS)) as [
    RedisMeteringStore,
    RedisMeteringStore,
  ];
  return {
    stores,
    cleanup: async () => {
      await Promise.all(clients.map((c) => c.quit()));
    },
  };
});

describe('a record as the export gives it', () => {
  const record: MeteringRecord = {
    subject: 'cus_a',
    hour: Date.UTC(2026, 10, 26, 13),
    units: 6,
    routes: { 'GET /v1/pets': 6 },
    revision: 2,
    delta: -5,
    closedAt: 0,
  };
  it('goes to Stripe as its delta only with an externalId and a change of units', () => {
    expect(stripeMeterEvent(record, 'api_units')).toBeNull();
    const billed = { ...record, externalId: 'cus_Stripe1' };
    expect(stripeMeterEvent(billed, 'api_units')).toEqual({
      event_name: 'api_units',
      identifier: 'cus_a/2026-11-26T13:00:00.000Z/2',
      payload: { stripe_customer_id: 'cus_Stripe1', value: '-5' },
      timestamp: record.hour / 1000,
    });
    expect(stripeMeterEvent({ ...billed, delta: 0 }, 'api_units')).toBeNull();
    expect(cloudEvent(record).data).not.toHaveProperty('externalId');
    expect(cloudEvent(billed).data.externalId).toBe('cus_Stripe1');
  });

  it('reads back a cursor it gave, sequence of any length, and names at most 64 characters of one it did not', () => {
    expect(positionOf(cursorOf('1764680000000-12'))).toBe('1764680000000-12');
    const long = 'x'.repeat(100);
    expect(() => positionOf(long)).toThrow(BadCursorError);
    expect(() => positionOf(long)).toThrow(`after is not a cursor this export gave: "${'x'.repeat(64)}"`);
  });

  it('leaves out of the Stripe view a subject without an externalId and a revision moving units between routes', async () => {
    const store = new MemoryMeteringStore();
    const hour = record.hour;
    await store.record({ subject: 'key_lone', hour, units: 4, routes: { 'GET /v1/pets': 4 } }, hour);
    const billed = { subject: 'cus_b', hour, units: 3, externalId: 'cus_Stripe2' };
    await store.record({ ...billed, routes: { 'GET /v1/pets': 3 } }, hour);
    await store.record({ ...billed, routes: { 'GET /v1/pets': 2, 'POST /v1/pets': 1 } }, hour);
    const page = await meteringEvents(store, { format: 'stripe-meter-events' }, 'api_units');
    expect(page.events.map((e) => ('payload' in e ? e.payload : e))).toEqual([
      { stripe_customer_id: 'cus_Stripe2', value: '3' },
    ]);
    expect((await meteringEvents(store, {}, 'api_units')).events).toHaveLength(3);
  });

  it('gives 100 events a page unless asked, a bad cursor as a 400 and any other failure as it is', async () => {
    const store = new MemoryMeteringStore();
    for (let i = 0; i < 101; i++) {
      await store.record({ subject: 'key_many', hour: record.hour + i * HOUR_MS, units: 1, routes: {} }, 0);
    }
    const first = await meteringEvents(store, {}, 'api_units');
    expect(first.events).toHaveLength(100);
    const rest = await meteringEvents(store, { after: first.next ?? '' }, 'api_units');
    const last = new Date(record.hour + 100 * HOUR_MS).toISOString();
    expect(rest.events.map((e) => ('id' in e ? e.id : e))).toEqual([`key_many/${last}/1`]);
    await expect(meteringEvents(store, { after: 'nope' }, 'api_units')).rejects.toMatchObject({
      name: 'ApiError',
      statusCode: 400,
      code: 'invalid_request',
      message: 'after is not a cursor this export gave: "nope"',
    });
    const away = Object.assign(Object.create(store) as MemoryMeteringStore, {
      read: () => Promise.reject(new Error('store away')),
    });
    await expect(meteringEvents(away, {}, 'api_units')).rejects.toThrow(new Error('store away'));
    await expect(meteringEvents(away, {}, 'api_units')).rejects.not.toHaveProperty('statusCode');
  });
});
