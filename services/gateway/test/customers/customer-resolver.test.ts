import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomerStore } from '../../src/customers/customer-store.js';
import { createKey } from '../../src/keys/create-key.js';
import { toKeyFileEntry } from '../../src/keys/keys-file.js';
import { ADMIN_TOKEN, bearer, type TestGateway, useGateways } from '../support/helpers.js';

/*
 * Keys' customers at the gate, cached per replica: API_KEYS_FILE's customers held apart from the
 * cache (never fetched again, however many are active), the store's in a cache of KEY_CACHE_MAX.
 */

const gateways = useGateways();
const admin = bearer(ADMIN_TOKEN);
let dir: string;
let file: string;

/** More customers than the cache below holds, one key each, each customer with its own minute limit. */
const CUSTOMERS = 5;
const FILE_KEYS = Array.from({ length: CUSTOMERS }, (_, i) => createKey({ plan: 'pro', name: `file ${i}` }));
const FILE = {
  keys: FILE_KEYS.map(({ record }, i) => toKeyFileEntry({ ...record, customerId: `cus_file${i}` })),
  customers: Array.from({ length: CUSTOMERS }, (_, i) => ({
    id: `cus_file${i}`,
    name: `Customer ${i}`,
    plan: 'pro',
    limits: { perMinute: 100 + i },
  })),
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'customer-resolver-'));
  file = join(dir, 'keys.json');
  await writeFile(file, JSON.stringify(FILE));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Counts the customer store's gets (the real store's own answers), by customer id. */
function countGets(store: CustomerStore): string[] {
  const asked: string[] = [];
  const get = store.get.bind(store);
  store.get = (id) => {
    asked.push(id);
    return get(id);
  };
  return asked;
}

const get = (gw: TestGateway, key: string) => gw.app.inject({ url: '/v1/pets', headers: bearer(key) });

describe('the customers of keys at the gate', () => {
  it('asks the store for no customer of API_KEYS_FILE, with more of them active than KEY_CACHE_MAX', async () => {
    const gw = await gateways.start({ redisUrl: null, env: { API_KEYS_FILE: file, KEY_CACHE_MAX: '2' } });
    const asked = countGets(gw.deps.customerStore);
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < CUSTOMERS; i++) {
        const res = await get(gw, FILE_KEYS[i]?.key as string);
        expect(res.statusCode, res.body).toBe(200);
        expect(res.headers['ratelimit-policy']).toContain(`"customer-minute";q=${100 + i};w=60`);
      }
    }
    expect(asked).toEqual([]);
  });

  it('fetches a store customer again once it fell out of a full cache, and applies a change from the next request', async () => {
    const at = Date.parse('2026-11-27T04:00:00.000Z');
    const gw = await gateways.start({ redisUrl: null, now: () => at, env: { KEY_CACHE_MAX: '1' } });
    const keys: string[] = [];
    const ids: string[] = [];
    for (const name of ['Acme', 'Globex']) {
      const customer = await gw.admin.inject({
        method: 'POST',
        url: '/admin/customers',
        headers: admin,
        payload: { name, plan: 'pro', limits: { perMinute: 50 } },
      });
      expect(customer.statusCode, customer.body).toBe(201);
      const key = await gw.admin.inject({
        method: 'POST',
        url: '/admin/keys',
        headers: admin,
        payload: { name, customerId: customer.json().id },
      });
      expect(key.statusCode, key.body).toBe(201);
      ids.push(customer.json().id);
      keys.push(key.json().key);
    }
    const [acme, globex] = keys as [string, string];
    const asked = countGets(gw.deps.customerStore);
    for (let round = 0; round < 2; round++) {
      for (const key of [acme, globex]) {
        expect((await get(gw, key)).headers['ratelimit-policy']).toContain('"customer-minute";q=50;w=60');
      }
    }
    // One customer cached at a time, taken in turn: each request fetches its customer again.
    expect(asked).toEqual([ids[0], ids[1], ids[0], ids[1]]);
    // The first change finds Acme out of the cache, the second finds it cached (its event evicts
    // it); both in the same millisecond, so neither can be told from the last by updatedAt.
    for (const perMinute of [7, 9]) {
      const patched = await gw.admin.inject({
        method: 'PATCH',
        url: `/admin/customers/${ids[0]}`,
        headers: admin,
        payload: { limits: { perMinute } },
      });
      expect(patched.statusCode, patched.body).toBe(200);
      for (let again = 0; again < 2; again++) {
        expect((await get(gw, acme)).headers['ratelimit-policy']).toContain(`"customer-minute";q=${perMinute};w=60`);
      }
    }
    expect((await get(gw, globex)).headers['ratelimit-policy']).toContain('"customer-minute";q=50;w=60');
  });
});
