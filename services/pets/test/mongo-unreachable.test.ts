import { createRegistry } from '@animal-store/common/metrics.js';
import { freePort } from '@animal-store/tests/support/runtime.js';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { MongoPetStore, mongoClientOptions } from '../src/store/mongo-pet-store.js';
import { type App, conformanceChecker, expectError } from './helpers.js';

// The real driver against a port where nothing listens: what a request sees when MongoDB is
// down. No Mongo server is involved or imitated; server selection simply fails.
describe('MongoPetStore with MongoDB unreachable', () => {
  let client: MongoClient;
  let app: App;
  let conforms: Awaited<ReturnType<typeof conformanceChecker>>;

  const registry = createRegistry('pets', false);

  beforeAll(async () => {
    const port = await freePort();
    client = new MongoClient(`mongodb://127.0.0.1:${port}/?directConnection=true`, {
      ...mongoClientOptions,
      serverSelectionTimeoutMS: 250,
    });
    // Load shedding off: it samples this test worker's event loop, which a busy machine stalls;
    // shedding has its own tests (tests/faults/overload.test.ts).
    app = buildApp(
      { logLevel: 'silent', overload: { maxEventLoopDelayMs: 0, maxHeapUsedBytes: 0 } },
      { store: new MongoPetStore(client.db('pets')), registry },
    );
    await app.ready();
    conforms = await conformanceChecker(app);
  });

  afterAll(async () => {
    await app.close();
    await client.close();
  });

  it('answers list, create and get with 503 upstream_unavailable in the Error shape', async () => {
    const list = await app.inject({ url: '/v1/pets' });
    expectError(list, 503, 'upstream_unavailable');
    conforms(list, '/v1/pets', 'get');

    const create = await app.inject({ method: 'POST', url: '/v1/pets', payload: { name: 'Rex', categoryId: 1 } });
    expectError(create, 503, 'upstream_unavailable');
    conforms(create, '/v1/pets', 'post');

    const get = await app.inject({ url: '/v1/pets/1' });
    expectError(get, 503, 'upstream_unavailable');
    expect(get.headers.deprecation).toBe('@1767225600');
    conforms(get, '/v1/pets/{petId}', 'get');
    expect(get.body).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|Mongo/);
  });

  it('is not ready, but alive', async () => {
    expectError(await app.inject({ url: '/readyz' }), 503, 'upstream_unavailable');
    expect((await app.inject({ url: '/healthz' })).statusCode).toBe(200);
  });

  it('still validates before touching the store', async () => {
    expectError(await app.inject({ url: '/v1/pets?limit=0' }), 400, 'invalid_request');
    expectError(await app.inject({ url: '/v1/pets/abc' }), 400, 'invalid_request');
  });

  it('counts the failed store calls as errors', async () => {
    await app.inject({ url: '/v1/pets' });
    const metrics = await registry.metrics();
    expect(metrics).toMatch(
      /pets_store_operation_duration_seconds_count\{[^}]*operation="list"[^}]*outcome="error"[^}]*\} [1-9]/,
    );
  });
});
