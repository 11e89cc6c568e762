import { freePort } from '@animal-store/tests/support/runtime.js';
import { MongoClient, MongoServerError, MongoWriteConcernError } from 'mongodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey } from '../../src/keys/api-key.js';
import type { KeyStore } from '../../src/keys/key-store.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import { MongoKeyStore } from '../../src/keys/mongo-key-store.js';
import { ADMIN_TOKEN, addKey, bearer, startGateway, type TestGateway } from '../support/helpers.js';

/*
 * What clients and operators see of MongoDB's failures on the two paths that meet them: the gate
 * (an uncached key) and the admin API. The failures are the driver's own error classes, as the
 * driver raises them from a server's reply; no server is needed, and none is pretended.
 */

const errorsOf = (logs: Record<string, unknown>[]) => logs.filter((line) => line.level === 50);

describe('an uncached key while MongoDB has no server to select (an election, an outage)', () => {
  let client: MongoClient;
  let gw: TestGateway;
  const logs: Record<string, unknown>[] = [];

  beforeAll(async () => {
    // Nothing listens there, and server selection waits longer than this test may take: only the
    // gate's own bound can answer the request.
    client = new MongoClient(`mongodb://127.0.0.1:${await freePort()}/?directConnection=true`, {
      serverSelectionTimeoutMS: 60_000,
    });
    gw = await startGateway({
      redisUrl: null,
      keyStore: new MongoKeyStore(client.db('gateway')),
      env: { KEY_LOOKUP_TIMEOUT_MS: '200' },
      logs,
    });
  });

  afterAll(async () => {
    await gw?.close();
    await client?.close();
  });

  it('answers 503 after KEY_LOOKUP_TIMEOUT_MS, not after server selection, and logs why', async () => {
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(generateApiKey()) });
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json()).toEqual({
      code: 'upstream_unavailable',
      message: 'Cannot verify API keys right now; retry shortly',
      status: 503,
    });
    expect(res.headers['retry-after']).toBe('5');
    expect(errorsOf(logs)).toEqual([
      expect.objectContaining({
        msg: 'key store unavailable',
        err: expect.objectContaining({ message: expect.stringContaining('KEY_LOOKUP_TIMEOUT_MS') }),
      }),
    ]);
  });
});

describe('MongoDB failures on the gate and the admin API', () => {
  const open: TestGateway[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((gw) => gw.close()));
  });

  /** A gateway whose key store fails `method` with `err`, as the MongoDB store passes it on. */
  async function failing(method: keyof KeyStore, err: Error) {
    const logs: Record<string, unknown>[] = [];
    const store = new MemoryKeyStore();
    const keyStore: KeyStore = Object.assign(Object.create(store), { [method]: () => Promise.reject(err) });
    const gw = await startGateway({ redisUrl: null, keyStore, logs });
    open.push(gw);
    return { gw, logs };
  }
  const admin = bearer(ADMIN_TOKEN);

  it('credentials MongoDB refuses (18): the gate answers 500 and the log names MONGO_URL', async () => {
    const { gw, logs } = await failing(
      'findByHash',
      new MongoServerError({ message: 'Authentication failed.', code: 18, codeName: 'AuthenticationFailed' }),
    );
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(generateApiKey()) });
    expect(res.statusCode, res.body).toBe(500);
    expect(res.json()).toEqual({ code: 'internal_error', message: 'Internal server error', status: 500 });
    expect(res.headers['x-ratelimit-limit']).toBeDefined();
    expect(errorsOf(logs).map((line) => line.msg)).toEqual([
      expect.stringMatching(/^key store: MongoDB refused the credentials \(code 18 AuthenticationFailed\).*MONGO_URL/),
    ]);
  });

  it('a revoke a majority did not confirm in time (64): 503 store_unavailable, retryable, and the log says so', async () => {
    const err = new MongoWriteConcernError({
      ok: 1,
      n: 1,
      writeConcernError: {
        code: 64,
        codeName: 'WriteConcernFailed',
        errmsg: 'waiting for replication timed out',
        errInfo: { wtimeout: true },
      },
    });
    const { gw, logs } = await failing('revoke', err);
    const { id } = await addKey(gw.deps, 'free');
    const res = await gw.admin.inject({ method: 'DELETE', url: `/admin/keys/${id}`, headers: admin });
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json()).toEqual({
      code: 'store_unavailable',
      message: expect.stringMatching(/could not confirm the write on a majority/),
      status: 503,
    });
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(errorsOf(logs).map((line) => line.msg)).toEqual([
      expect.stringMatching(
        /^key store: MongoDB did not confirm the write on a majority .*\(code 64 WriteConcernFailed\)/,
      ),
    ]);
  });

  it('a list stopped at its maxTimeMS (50): 503 store_unavailable, not 500', async () => {
    const { gw, logs } = await failing(
      'page',
      new MongoServerError({ message: 'operation exceeded time limit', code: 50, codeName: 'MaxTimeMSExpired' }),
    );
    const res = await gw.admin.inject({ url: '/admin/keys', headers: admin });
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json()).toEqual({ code: 'store_unavailable', message: expect.stringMatching(/in time/), status: 503 });
    expect(errorsOf(logs).map((line) => line.msg)).toEqual([expect.stringMatching(/code 50 MaxTimeMSExpired/)]);
  });

  it('a user without the rights (13): 500 internal_error, and the log says to grant them', async () => {
    const { gw, logs } = await failing(
      'page',
      new MongoServerError({ message: 'not authorized on gateway', code: 13, codeName: 'Unauthorized' }),
    );
    const res = await gw.admin.inject({ url: '/admin/keys', headers: admin });
    expect(res.statusCode, res.body).toBe(500);
    expect(res.json()).toEqual({ code: 'internal_error', message: 'Internal server error', status: 500 });
    expect(errorsOf(logs).map((line) => line.msg)).toEqual([
      expect.stringMatching(/^key store: MongoDB refused the operation \(code 13 Unauthorized\).*grant/),
    ]);
  });
});
