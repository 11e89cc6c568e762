import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { RedisProcess } from '@animal-store/tests/support/redis.js';
import { freePort } from '@animal-store/tests/support/runtime.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { MemoryCustomerStore } from '../../src/customers/memory-customer-store.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import type { RegionSync } from '../../src/regions/region-sync.js';
import { auth } from '../support/admin.js';
import { addKey, bearer, startEchoUpstream, startGateway, type TestGateway } from '../support/helpers.js';
import { NatsProcess } from '../support/nats.js';

/**
 * The regions example's NATS (deploy/compose/regions/nats-eu.conf and nats-us.conf), run as
 * written but on loopback ports: a server per region, joined as a supercluster by NATS gateways,
 * each region's gateway on its own server and its own Redis. What one region admits reaches the
 * other through the supercluster, so a key's limit holds across both.
 */
const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
const LIMIT = 100;
const MINUTE_MS = 60_000;
const REGIONS = ['eu', 'us'] as const;
type Region = (typeof REGIONS)[number];

const at = Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS + 1_000;
const now = () => at;

/** The example's file for a region, its addresses moved to loopback and free ports, its store to `storeDir`. */
function exampleConfig(region: Region, ports: Record<Region, Record<'client' | 'http' | 'route' | 'gateway', number>>) {
  const text = readFileSync(join(repoRoot, 'deploy/compose/regions', `nats-${region}.conf`), 'utf8');
  const own = ports[region];
  return (storeDir: string) =>
    text
      .replace('0.0.0.0:4222', `127.0.0.1:${own.client}`)
      .replace('0.0.0.0:8222', `127.0.0.1:${own.http}`)
      .replace('0.0.0.0:6222', `127.0.0.1:${own.route}`)
      .replace('0.0.0.0:7222', `127.0.0.1:${own.gateway}`)
      .replace(/nats:\/\/nats-(eu|us):6222/g, (_m, r: Region) => `nats://127.0.0.1:${ports[r].route}`)
      .replace(/nats:\/\/nats-(eu|us):7222/g, (_m, r: Region) => `nats://127.0.0.1:${ports[r].gateway}`)
      .replace('/data/jetstream', storeDir);
}

const servers: NatsProcess[] = [];
const redis: RedisProcess[] = [];
let upstream: Awaited<ReturnType<typeof startEchoUpstream>>;
const gateways = {} as Record<Region, TestGateway>;

const sync = (gw: TestGateway): RegionSync => {
  if (!gw.deps.regions) throw new Error('the test gateway has no region sync');
  return gw.deps.regions;
};

beforeAll(async () => {
  const ports = {} as Record<Region, Record<'client' | 'http' | 'route' | 'gateway', number>>;
  for (const region of REGIONS) {
    ports[region] = {
      client: await freePort(),
      http: await freePort(),
      route: await freePort(),
      gateway: await freePort(),
    };
  }
  for (const region of REGIONS)
    servers.push(await NatsProcess.fromConfig(ports[region].client, exampleConfig(region, ports)));
  redis.push(await RedisProcess.start(), await RedisProcess.start());
  upstream = await startEchoUpstream();
  const keyStore = new MemoryKeyStore();
  const customerStore = new MemoryCustomerStore();
  for (const [i, region] of REGIONS.entries()) {
    gateways[region] = await startGateway({
      redisUrl: redis[i]?.url,
      upstream: upstream.url,
      keyStore,
      customerStore,
      now,
      env: {
        NATS_URL: servers[i]?.url ?? '',
        REGION: region,
        REGION_SYNC_MS: '1000',
        REGION_STALE_MS: '600000',
        BAN_THRESHOLD: '1000000',
      },
    });
  }
  // The supercluster elects its JetStream leader once both servers see each other.
  await vi.waitFor(() => expect(REGIONS.map((r) => sync(gateways[r]).counts.connected)).toEqual([true, true]), {
    timeout: 30_000,
    interval: 50,
  });
}, 90_000);

afterAll(async () => {
  await Promise.allSettled(REGIONS.map((r) => gateways[r]?.close()));
  await Promise.allSettled([...servers.map((s) => s.remove()), ...redis.map((r) => r.stop()), upstream?.close()]);
});

async function admitted(gw: TestGateway, key: string, n: number): Promise<number> {
  let ok = 0;
  for (let i = 0; i < n; i++) {
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
    if (res.statusCode === 200) ok++;
    else expect(res.statusCode).toBe(429);
  }
  return ok;
}

describe('the regions example: two NATS servers joined as a supercluster', () => {
  it('carries what one region admits to the other, so the key gets its limit once across both', async () => {
    const { id, key } = await addKey(gateways.eu.deps, 'pro', { perMinute: LIMIT });
    expect(await admitted(gateways.eu, key, 70)).toBe(70);
    await sync(gateways.eu).publish();
    const windowId = Math.floor(at / MINUTE_MS);
    await vi.waitFor(() => expect(sync(gateways.us).counts.remoteCount(`k:${id}`, 'minute', windowId)).toBe(70), {
      timeout: 15_000,
      interval: 20,
    });
    expect(await admitted(gateways.us, key, 50)).toBe(LIMIT - 70);

    const seen = await gateways.us.admin.inject({ url: '/admin/regions', headers: auth });
    expect(seen.statusCode, seen.body).toBe(200);
    expect(seen.json()).toMatchObject({
      region: 'us',
      partitioned: false,
      regions: [{ region: 'eu', partitioned: false }],
    });
  });
});
