import { runMigration } from '@animal-store/common/mongo/migrate.js';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { RedisCustomerLocks } from '../../src/customers/customer-locks.js';
import { MemoryCustomerStore } from '../../src/customers/memory-customer-store.js';
import { MongoCustomerStore } from '../../src/customers/mongo-customer-store.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import { MongoKeyStore } from '../../src/keys/mongo-key-store.js';
import { GATEWAY_MIGRATION } from '../../src/migrations.js';
import { expectError } from '../support/admin.js';
import { startGateway, type TestGateway, useGateways } from '../support/helpers.js';
import { useMongoDb } from '../support/mongo-db.js';
import { admin, adminPost, type Browser, signIn } from './support.js';

/*
 * A plan's maxKeys is exact under concurrency: creates at once, on one replica or on several
 * sharing Redis and the key store, leave exactly maxKeys live keys; the others are 409 conflict.
 * (The admin API's key creation is not bound by maxKeys: the operator may give a customer more.)
 */

const gateways = useGateways();
const mongo = await useMongoDb('maxKeys on MongoDB');

/**
 * The memory key store answering its count on the event loop's next turn, as MongoDB answers
 * after a round trip: without that, a count and the insert after it ran in one turn of microtasks
 * and no other create could come between them, which hid the race in memory.
 */
class RoundTripKeyStore extends MemoryKeyStore {
  override async liveKeysOf(customerId: string) {
    const keys = await super.liveKeysOf(customerId);
    await new Promise((resolve) => setImmediate(resolve));
    return keys;
  }
}
/** The free plan's maxKeys (plans.ts DEFAULT_MAX_KEYS: the spec's plans name none). */
const MAX = 5;
const N = 12;

async function liveKeys(gw: TestGateway, customerId: string): Promise<number> {
  const res = await gw.admin.inject({ url: `/admin/keys?customerId=${customerId}&revoked=false`, headers: admin });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json().items as unknown[]).length;
}

async function createAtOnce(browsers: Browser[]): Promise<number[]> {
  const answers = await Promise.all(
    Array.from({ length: N }, (_, i) =>
      (browsers[i % browsers.length] as Browser).send('POST', '/portal/api/keys', { name: `k${i}` }),
    ),
  );
  return answers.map((a) => a.statusCode).sort();
}

const expected = [...Array(MAX).fill(201), ...Array(N - MAX).fill(409)];

describe('maxKeys under concurrent creates', () => {
  it('holds exactly on one gateway with Redis', async () => {
    const gw = await gateways.start({ keyStore: new RoundTripKeyStore() });
    const { id } = await adminPost(gw, '/admin/customers', { name: 'Small', plan: 'free' });
    expect(await createAtOnce([await signIn(gw, id as string)])).toEqual(expected);
    expect(await liveKeys(gw, id as string)).toBe(MAX);
  });

  it('holds exactly on one gateway without Redis', async () => {
    const gw = await startGateway({ keyStore: new RoundTripKeyStore() });
    try {
      const { id } = await adminPost(gw, '/admin/customers', { name: 'Small', plan: 'free' });
      const browser = await signIn(gw, id as string);
      expect(await createAtOnce([browser, await signIn(gw, id as string)])).toEqual(expected);
      expect(await liveKeys(gw, id as string)).toBe(MAX);
      // A revoked key frees its place, for one create only.
      const [first] = (await browser.get('/portal/api/keys')).json().items as Array<{ id: string }>;
      expect((await browser.send('DELETE', `/portal/api/keys/${first?.id}`)).statusCode).toBe(204);
      expect(await createAtOnce([browser])).toEqual([201, ...Array(N - 1).fill(409)]);
    } finally {
      await gw.close();
    }
  });

  it('holds exactly across replicas sharing Redis and the key store (as MongoDB is shared)', async () => {
    const keyStore = new RoundTripKeyStore();
    const customerStore = new MemoryCustomerStore();
    const a = await gateways.start({ keyStore, customerStore });
    const b = await gateways.start({ keyStore, customerStore, prefix: a.config.redisPrefix });
    const { id } = await adminPost(a, '/admin/customers', { name: 'Small', plan: 'free' });
    const browsers = [await signIn(a, id as string), await signIn(b, id as string)];
    expect(await createAtOnce(browsers)).toEqual(expected);
    expect(await liveKeys(a, id as string)).toBe(MAX);
  });
});

describe('a create that cannot take its customer’s lock', () => {
  it('is answered 409 conflict while another replica holds the lock past the wait, and makes no key', async () => {
    const gw = await gateways.start();
    const redis = gw.redis as Redis;
    const { id } = await adminPost(gw, '/admin/customers', { name: 'Small', plan: 'free' });
    const browser = await signIn(gw, id as string);
    // A replica that died holding the customer's lock (it ends on its own after its time to live).
    const lock = `${gw.config.redisPrefix}lock:customer:${id}`;
    await redis.set(lock, 'dead-replica', 'PX', 60_000);
    // This replica waits 50 ms for a lock rather than 5 s (RedisCustomerLocks' own option).
    gw.deps.customerLocks = new RedisCustomerLocks(redis, gw.config.redisPrefix, { waitMs: 50 });
    const refused = await browser.send('POST', '/portal/api/keys', { name: 'k' });
    expectError(refused, 409, 'conflict');
    expect(refused.json().message).toBe('Another change to your keys is under way; try again');
    expect(await liveKeys(gw, id as string)).toBe(0);
    expect(await redis.get(lock)).toBe('dead-replica');
    // Once the lock has ended, the same create is made.
    await redis.del(lock);
    expect((await browser.send('POST', '/portal/api/keys', { name: 'k' })).statusCode).toBe(201);
    expect(await liveKeys(gw, id as string)).toBe(1);
  });
});

describe.skipIf(!mongo)('maxKeys under concurrent creates on MongoDB', () => {
  const dbs = mongo?.connect();

  it('holds exactly across two replicas sharing Redis and one MongoDB database', async () => {
    const { db, drop } = await (dbs as NonNullable<typeof dbs>).fresh();
    try {
      const keyStore = new MongoKeyStore(db);
      const customerStore = new MongoCustomerStore(db);
      await runMigration(db, GATEWAY_MIGRATION, () => {});
      const a = await gateways.start({ keyStore, customerStore });
      const b = await gateways.start({ keyStore, customerStore, prefix: a.config.redisPrefix });
      const { id } = await adminPost(a, '/admin/customers', { name: 'Small', plan: 'free' });
      const browsers = [await signIn(a, id as string), await signIn(b, id as string)];
      expect(await createAtOnce(browsers)).toEqual(expected);
      expect(await liveKeys(b, id as string)).toBe(MAX);
    } finally {
      await drop();
    }
  });
});
