import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRegistry } from '@animal-store/common/metrics.js';
import { buildApp as buildPets } from '@animal-store/pets/app.js';
import { MemoryPetStore } from '@animal-store/pets/store/memory-pet-store.js';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { findMongo, type TestMongo } from '../support/mongo.js';
import { RedisProcess, redisServerBinary } from '../support/redis.js';
import { freePort } from '../support/runtime.js';
import {
  createKeyInFile,
  killAllServices,
  metricValue,
  migrateMongo,
  ServiceProcess,
} from '../support/service-process.js';

/**
 * Key events between gateway replicas started as users start them (`node dist/server.js`, one
 * process each) on one Redis, with the key store poll at its longest: what reaches the other
 * replica within a second can only have come through its pub/sub subscription. The in-process
 * replica suite (services/gateway/test/replicas/key-sync.test.ts) covers each path alone in detail; this
 * one covers the real start-up, where the subscription used to race the connection's ready check.
 *
 * Bans live in Redis, so a key from a shared API_KEYS_FILE shows a ban lift; revocations, plan
 * changes and rotations need a key store the processes share, MongoDB, and run only where there is
 * one.
 */

const ADMIN_TOKEN = 'key-events-admin-token-0123456789';
const POLL_MAX = '60000';

type Pets = ReturnType<typeof buildPets>;

interface Replica {
  process: ServiceProcess;
  adminUrl: string;
}

describe('gateway processes on one Redis', () => {
  let redis: RedisProcess;
  let pets: Pets;
  let petsUrl: string;
  let inspector: Redis;
  let dir: string;
  let mongo: TestMongo | null = null;

  beforeAll(async () => {
    redisServerBinary();
    dir = await mkdtemp(join(tmpdir(), 'key-events-'));
    redis = await RedisProcess.start();
    inspector = new Redis(redis.url);
    pets = buildPets({ logLevel: 'silent' }, { store: new MemoryPetStore(), registry: createRegistry('pets', false) });
    await pets.listen({ host: '127.0.0.1', port: 0 });
    petsUrl = `http://127.0.0.1:${(pets.server.address() as AddressInfo).port}`;
  });
  afterEach(async () => {
    await killAllServices();
  });
  afterAll(async () => {
    inspector?.disconnect();
    await mongo?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
    await pets?.close();
    await redis?.stop();
  });

  async function replica(prefix: string, store: Record<string, string>): Promise<Replica> {
    const adminPort = await freePort();
    const process = await ServiceProcess.start(
      'gateway',
      {
        PETS_URL: petsUrl,
        REDIS_URL: redis.url,
        REDIS_PREFIX: prefix,
        ADMIN_TOKEN,
        ADMIN_HOST: '127.0.0.1',
        ADMIN_PORT: String(adminPort),
        PORTAL_PORT: '0',
        REVOCATION_POLL_MS: POLL_MAX,
        BAN_THRESHOLD: '1',
        BAN_GRACE_MS: '0',
        LOG_LEVEL: 'info',
        ...store,
      },
      { ready: '/readyz' },
    );
    return { process, adminUrl: `http://127.0.0.1:${adminPort}` };
  }

  async function subscribed(r: Replica): Promise<number> {
    const exposition = await (await fetch(`${r.process.metricsUrl}/metrics`)).text();
    return metricValue(exposition, 'gateway_event_bus_subscribed');
  }

  async function admin(r: Replica, method: string, path: string, body?: unknown) {
    const res = await fetch(`${r.adminUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${ADMIN_TOKEN}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: res.status === 204 ? null : ((await res.json()) as Record<string, unknown>) };
  }

  async function get(r: Replica, key: string) {
    const res = await fetch(`${r.process.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
    const body = (await res.json()) as { code?: string };
    return { status: res.status, code: body.code, limit: res.headers.get('x-ratelimit-limit') };
  }

  it('each replica subscribes at start, and a ban lifted on one is lifted on the other within 1 s', async () => {
    const keysFile = join(dir, `keys-${Date.now()}.json`);
    const { id, key } = await createKeyInFile(keysFile, 'enterprise', { perMinute: 1, perDay: 100 });
    const prefix = `ke${Date.now()}:`;
    const [a, b] = await Promise.all([
      replica(prefix, { API_KEYS_FILE: keysFile }),
      replica(prefix, { API_KEYS_FILE: keysFile }),
    ]);
    for (const r of [a, b]) {
      await vi.waitFor(async () => expect(await subscribed(r)).toBe(1), { timeout: 10_000 });
      // Log lines to a pipe are written in batches, at least every half second.
      await vi.waitFor(() => expect(r.process.messages('key events: subscribed')).toHaveLength(1), { timeout: 2_000 });
    }
    const [, count] = (await inspector.call('PUBSUB', 'NUMSUB', `${prefix}events`)) as [string, number];
    expect(count).toBe(2);

    // B remembers the ban and answers it without asking Redis: only the event can lift it there.
    expect((await get(a, key)).status).toBe(200);
    expect((await get(a, key)).code).toBe('rate_limit_exceeded');
    expect((await get(a, key)).code).toBe('api_key_banned');
    expect((await get(b, key)).code).toBe('api_key_banned');
    expect((await admin(a, 'DELETE', `/admin/keys/${id}/ban`)).status).toBe(204);
    await vi.waitFor(async () => expect((await get(b, key)).code).toBe('rate_limit_exceeded'), {
      timeout: 1_000,
      interval: 50,
    });
  });

  it('a key from the shared keys file expires at its moment on every replica', { timeout: 60_000 }, async () => {
    const keysFile = join(dir, `expiring-${Date.now()}.json`);
    const { key } = await createKeyInFile(keysFile, 'pro', null);
    // Far enough ahead that both replicas are up and have served it before it ends: starting two
    // took more than 8 s on a machine busy with other test runs (the first check then met an
    // expired key). Each must refuse it from then on.
    const expiresAt = new Date(Date.now() + 20_000).toISOString();
    const entries = JSON.parse(await readFile(keysFile, 'utf8')) as Array<Record<string, unknown>>;
    await writeFile(keysFile, JSON.stringify(entries.map((e) => ({ ...e, expiresAt }))));
    const prefix = `kx${Date.now()}:`;
    const [a, b] = await Promise.all([
      replica(prefix, { API_KEYS_FILE: keysFile }),
      replica(prefix, { API_KEYS_FILE: keysFile }),
    ]);
    for (const r of [a, b]) expect((await get(r, key)).status).toBe(200);
    for (const r of [a, b]) {
      await vi.waitFor(async () => expect((await get(r, key)).code).toBe('expired_api_key'), {
        timeout: 30_000,
        interval: 100,
      });
    }
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(expiresAt));
  });

  it('a revocation, a plan change and a rotation on one replica apply on the other within 1 s (MongoDB key store)', async (ctx) => {
    const found = await findMongo();
    if (!found.mongo) {
      console.warn(`[skip] key events between processes sharing MongoDB: ${found.reason}`);
      return ctx.skip();
    }
    mongo = found.mongo;
    const prefix = `km${Date.now()}:`;
    const store = { MONGO_URL: mongo.url };
    await migrateMongo(mongo.url, ['gateway']);
    const [a, b] = await Promise.all([replica(prefix, store), replica(prefix, store)]);
    for (const r of [a, b]) await vi.waitFor(async () => expect(await subscribed(r)).toBe(1), { timeout: 10_000 });

    const revoked = await admin(a, 'POST', '/admin/keys', { plan: 'pro' });
    expect(revoked.status).toBe(201);
    const revokedKey = String(revoked.body?.key);
    expect((await get(b, revokedKey)).status).toBe(200);
    expect((await admin(a, 'DELETE', `/admin/keys/${revoked.body?.id}`)).status).toBe(204);
    await vi.waitFor(async () => expect((await get(b, revokedKey)).code).toBe('invalid_api_key'), {
      timeout: 1_000,
      interval: 50,
    });

    const changed = await admin(a, 'POST', '/admin/keys', { plan: 'free' });
    const changedKey = String(changed.body?.key);
    expect((await get(b, changedKey)).limit).toBe('60');
    expect((await admin(a, 'PATCH', `/admin/keys/${changed.body?.id}`, { plan: 'pro' })).status).toBe(200);
    await vi.waitFor(async () => expect((await get(b, changedKey)).limit).toBe('300'), {
      timeout: 1_000,
      interval: 50,
    });

    // B has served the old secret (and so holds it resolved): only the event can end it there.
    const rotatedKey = await admin(a, 'POST', '/admin/keys', { plan: 'pro' });
    const oldSecret = String(rotatedKey.body?.key);
    expect((await get(b, oldSecret)).status).toBe(200);
    const rotation = await admin(a, 'POST', `/admin/keys/${rotatedKey.body?.id}/rotate`, { gracePeriodSeconds: 0 });
    expect(rotation.status).toBe(200);
    expect((await get(b, String(rotation.body?.key))).status).toBe(200);
    await vi.waitFor(async () => expect((await get(b, oldSecret)).code).toBe('expired_api_key'), {
      timeout: 1_000,
      interval: 50,
    });
  });
});
