import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRegistry } from '@animal-store/common/metrics.js';
import { runMigration } from '@animal-store/common/mongo/migrate.js';
import { buildApp as buildPets } from '@animal-store/pets/app.js';
import { PETS_MIGRATION } from '@animal-store/pets/migrations.js';
import { MongoPetStore, mongoClientOptions } from '@animal-store/pets/store/mongo-pet-store.js';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { findMongo } from '../support/mongo.js';
import { type Outcome, send } from '../support/request-loop.js';
import { freePort } from '../support/runtime.js';
import { createKeyInFile, killAllServices, runToExit, ServiceProcess } from '../support/service-process.js';

/**
 * MongoDB unreachable under the pets service: at start (the process refuses to start, quickly and
 * saying why), while running (each request a quick 503 Error, readiness fails, liveness holds), and
 * through the gateway (the client gets the same 503, not a 504 after the upstream timeout).
 */

/** pets gives up on MongoDB after serverSelectionTimeoutMS (2 s); a request must end well before 5 s. */
const REQUEST_BOUND_MS = 5_000;

type Pets = ReturnType<typeof buildPets>;

function expectUnavailable(o: Outcome): void {
  expect(o.error, JSON.stringify(o)).toBeUndefined();
  expect(o.status, o.body).toBe(503);
  expect(o.headers?.['content-type']).toMatch(/^application\/json/);
  expect(JSON.parse(o.body ?? '')).toEqual({ code: 'upstream_unavailable', message: expect.any(String), status: 503 });
  expect(o.body).not.toMatch(/Mongo|ECONNREFUSED|127\.0\.0\.1|stack/);
  expect(o.end - o.start).toBeLessThan(REQUEST_BOUND_MS);
}

/** Every pets operation, once each, with a client-side bound far above the one asserted. */
function everyOperation(base: string, headers: Record<string, string> = {}): Promise<Outcome>[] {
  const meta = (tag: string) => ({ loop: 0, seq: 0, tag });
  const json = { ...headers, 'content-type': 'application/json' };
  return [
    send({ url: `${base}/v1/pets`, headers }, meta('list'), 30_000),
    send({ url: `${base}/v1/pets?status=sold&limit=5`, headers }, meta('list-status'), 30_000),
    send({ url: `${base}/v1/pets/1`, headers }, meta('get'), 30_000),
    send(
      { url: `${base}/v1/pets`, method: 'POST', headers: json, body: JSON.stringify({ name: 'Rex', categoryId: 1 }) },
      meta('create'),
      30_000,
    ),
  ];
}

describe('pets process with MongoDB unreachable at start', () => {
  it('exits non-zero within seconds (not the driver default 30 s), with one line saying why and no password', async () => {
    const mongoPort = await freePort();
    const result = await runToExit(
      'pets',
      {
        MONGO_URL: `mongodb://user:hunter2@127.0.0.1:${mongoPort}/?directConnection=true`,
        PORT: String(await freePort()),
      },
      20_000,
    );
    const output = result.logs.map((l) => l.raw).join('\n');
    expect(result.killedByBound, output).toBe(false);
    expect(result.code, output).toBe(1);
    expect(result.elapsedMs).toBeLessThan(10_000);
    expect(result.logs.some((l) => l.json?.msg === 'PET STORE: MongoDB')).toBe(true);
    // One line naming MONGO_URL, not a fatal record with a stack (tests/faults/start-up.test.ts).
    expect(result.logs.filter((l) => l.json === null).map((l) => l.raw)).toEqual([
      expect.stringMatching(
        /^pets: MONGO_URL=mongodb:\/\/user:\*\*\*@127\.0\.0\.1:\d+\/: MongoDB cannot be reached \(.*ECONNREFUSED/,
      ),
    ]);
    expect(output).not.toContain('hunter2');
    expect(output).not.toContain('Server listening');
  });
});

describe('pets with MongoDB unreachable while serving', () => {
  let client: MongoClient;
  let pets: Pets;
  let petsUrl: string;
  let dir: string;

  beforeAll(async () => {
    const port = await freePort();
    // The production client options, against a port where nothing listens.
    client = new MongoClient(`mongodb://127.0.0.1:${port}/?directConnection=true`, mongoClientOptions);
    pets = buildPets(
      { logLevel: 'silent' },
      { store: new MongoPetStore(client.db('pets')), registry: createRegistry('pets', false) },
    );
    await pets.listen({ host: '127.0.0.1', port: 0 });
    petsUrl = `http://127.0.0.1:${(pets.server.address() as AddressInfo).port}`;
    dir = await mkdtemp(join(tmpdir(), 'faults-mongo-'));
  });

  afterAll(async () => {
    await killAllServices();
    await pets?.close();
    await client?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('answers every operation 503 upstream_unavailable in the Error shape, each within 5 s, several at once', async () => {
    const outcomes = await Promise.all([...everyOperation(petsUrl), ...everyOperation(petsUrl)]);
    for (const o of outcomes) expectUnavailable(o);
  });

  it('is not ready (503) but alive (200), each answered within 5 s', async () => {
    const meta = { loop: 0, seq: 0, tag: 'probe' };
    const ready = await send({ url: `${petsUrl}/readyz` }, meta, 30_000);
    expectUnavailable(ready);
    const live = await send({ url: `${petsUrl}/healthz` }, meta, 30_000);
    expect(live.status).toBe(200);
    expect(live.end - live.start).toBeLessThan(1_000);
  });

  it('through the gateway, the client gets the same 503 (not a 504 after the upstream timeout)', async () => {
    const keysFile = join(dir, 'keys.json');
    const { key } = await createKeyInFile(keysFile);
    const gateway = await ServiceProcess.start('gateway', { PETS_URL: petsUrl, API_KEYS_FILE: keysFile });
    const outcomes = await Promise.all(everyOperation(gateway.url, { authorization: `Bearer ${key}` }));
    for (const o of outcomes) {
      expectUnavailable(o);
      // The gateway's rate-limit headers are on the answer, as on every answer.
      expect(o.headers?.['x-ratelimit-limit']).toBe('100000');
    }
    // Not ready is pets' business: the gateway's readiness is about its key store.
    expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200);
    expect(gateway.alive).toBe(true);
  });
});

const { mongo, reason } = await findMongo();
const ownMongo = mongo !== null && mongo.source !== 'env';
if (!ownMongo) {
  console.warn(`[skip] MongoDB stopped mid-run: ${mongo ? 'MONGO_URL is shared, not ours to stop' : reason}`);
}

describe.skipIf(!ownMongo)('pets with MongoDB stopped mid-run', () => {
  let client: MongoClient;
  let pets: Pets;
  let petsUrl: string;

  beforeAll(async () => {
    client = new MongoClient(mongo!.url, mongoClientOptions);
    await client.connect();
    const db = client.db(`pets_faults_${randomUUID().replaceAll('-', '')}`.slice(0, 38));
    await runMigration(db, PETS_MIGRATION, () => {});
    const store = new MongoPetStore(db);
    pets = buildPets({ logLevel: 'silent' }, { store, registry: createRegistry('pets', false) });
    await pets.listen({ host: '127.0.0.1', port: 0 });
    petsUrl = `http://127.0.0.1:${(pets.server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await pets?.close();
    await client?.close();
    await mongo?.stop().catch(() => {});
  });

  it('serves, then answers 503 within 5 s per request once MongoDB is gone, and stays alive', async () => {
    const before = await Promise.all(everyOperation(petsUrl));
    expect(before.map((o) => o.status)).toEqual([200, 200, expect.any(Number), 201]);
    expect((await fetch(`${petsUrl}/readyz`)).status).toBe(200);

    // stop() signals MongoDB and may return before it is gone; readiness tells when it is.
    await mongo!.stop();
    await vi.waitFor(async () => expect((await fetch(`${petsUrl}/readyz`)).status).toBe(503), {
      timeout: 20_000,
      interval: 200,
    });
    const after = await Promise.all([...everyOperation(petsUrl), ...everyOperation(petsUrl)]);
    for (const o of after) expectUnavailable(o);
    expectUnavailable(await send({ url: `${petsUrl}/readyz` }, { loop: 0, seq: 0, tag: 'ready' }, 30_000));
    expect((await fetch(`${petsUrl}/healthz`)).status).toBe(200);
  });
});
