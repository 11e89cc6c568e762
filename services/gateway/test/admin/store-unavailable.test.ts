import { freePort } from '@animal-store/tests/support/runtime.js';
import { ReplyError } from 'ioredis';
import { MongoClient, MongoServerError, MongoServerSelectionError } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeUnavailable } from '../../src/api/store-unavailable.js';
import { MongoCustomerStore } from '../../src/customers/mongo-customer-store.js';
import { createKey } from '../../src/keys/create-key.js';
import { MongoKeyStore } from '../../src/keys/mongo-key-store.js';
import { ADMIN_TOKEN, bearer, startGateway, type TestGateway } from '../support/helpers.js';

/*
 * What the admin API makes of an error that says a store cannot be reached (api/store-unavailable.ts):
 * a 503 with Retry-After. Redis's cases run against a real redis-server in tests/faults/admin-stores.test.ts;
 * MongoDB's here, against a MongoDB that is not there (no server answers on the port), which is
 * what an unreachable key store is.
 */

function withCode(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

describe('which errors mean a store cannot be reached', () => {
  it.each([
    ['a Redis command that timed out', new Error('Command timed out')],
    [
      'a Redis connection down, its offline queue off',
      new Error("Stream isn't writeable and enableOfflineQueue options is false"),
    ],
    ['a Redis connection closed', new Error('Connection is closed.')],
    ['a Cluster not ready', new Error("Cluster isn't ready and enableOfflineQueue options is false")],
    ['a Cluster failing over', new Error('Too many Cluster redirections. Last error: Error: Connection is closed.')],
    [
      'retries per request used up',
      Object.assign(new Error('Reached the max retries per request limit (which is 0).'), {
        name: 'MaxRetriesPerRequestError',
      }),
    ],
    ['Redis loading its data', new ReplyError('LOADING Redis is loading the dataset in memory')],
    ['a demoted Redis master', new ReplyError("READONLY You can't write against a read only replica.")],
    ['a refused connection', withCode('connect ECONNREFUSED 127.0.0.1:6379', 'ECONNREFUSED')],
    ['no MongoDB server to select', new MongoServerSelectionError('connection refused', { type: 'Unknown' } as never)],
    ['a MongoDB primary stepping down', new MongoServerError({ message: 'stepped down', code: 189 })],
  ])('%s: 503 with Retry-After', (_label, err) => {
    const answer = storeUnavailable(err);
    expect(answer?.toBody()).toEqual({ code: 'store_unavailable', message: expect.any(String), status: 503 });
    expect(Number(answer?.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  });

  it.each([
    ['a programming error', new TypeError('x is undefined')],
    ['a Redis script error', new ReplyError('ERR Error running script')],
    ['a wrong Redis type', new ReplyError('WRONGTYPE Operation against a key holding the wrong kind of value')],
    ['a MongoDB duplicate key', new MongoServerError({ message: 'E11000', code: 11000 })],
  ])('not %s, which stays a 500', (_label, err) => {
    expect(storeUnavailable(err)).toBeUndefined();
  });
});

describe('every key and customer route with the stores’ MongoDB unreachable', () => {
  let client: MongoClient;
  let gw: TestGateway;
  const auth = bearer(ADMIN_TOKEN);

  beforeAll(async () => {
    // Nothing listens there: every operation fails server selection, as with MongoDB down.
    client = new MongoClient(`mongodb://127.0.0.1:${await freePort()}/?directConnection=true`, {
      serverSelectionTimeoutMS: 300,
      connectTimeoutMS: 300,
    });
    const db = client.db('gateway');
    gw = await startGateway({
      redisUrl: null,
      keyStore: new MongoKeyStore(db),
      customerStore: new MongoCustomerStore(db),
    });
  });

  afterAll(async () => {
    await gw?.close();
    await client?.close();
  });

  const id = createKey({ plan: 'free' }).record.id;
  it.each([
    ['GET', '/admin/keys', undefined],
    ['GET', `/admin/keys/${id}`, undefined],
    ['POST', '/admin/keys', { plan: 'free' }],
    ['PATCH', `/admin/keys/${id}`, { name: 'renamed' }],
    ['POST', `/admin/keys/${id}/rotate`, {}],
    ['DELETE', `/admin/keys/${id}`, undefined],
    ['GET', `/admin/keys/${id}/usage`, undefined],
    ['GET', `/admin/keys/${id}/usage/history`, undefined],
    ['DELETE', `/admin/keys/${id}/ban`, undefined],
    ['POST', '/admin/keys', { customerId: 'cus_0000000000000000' }],
    ['POST', '/admin/customers', { name: 'Acme', plan: 'pro' }],
    ['GET', '/admin/customers', undefined],
    ['GET', '/admin/customers/cus_0000000000000000', undefined],
    ['GET', '/admin/customers/cus_0000000000000000/usage/history', undefined],
    ['PATCH', '/admin/customers/cus_0000000000000000', { name: 'renamed' }],
    ['DELETE', '/admin/customers/cus_0000000000000000', undefined],
    ['GET', '/admin/customers/cus_0000000000000000/usage', undefined],
  ] as const)('%s %s answers 503 store_unavailable with Retry-After', async (method, url, payload) => {
    const res = await gw.admin.inject({ method, url, headers: auth, ...(payload ? { payload } : {}) });
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json()).toEqual({ code: 'store_unavailable', message: expect.stringMatching(/MongoDB/), status: 503 });
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  });

  it('GET /admin/usage asks the key store only for keys with usage: with none, it answers without it', async () => {
    const res = await gw.admin.inject({ url: '/admin/usage', headers: auth });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().keys).toEqual([]);
  });
});
