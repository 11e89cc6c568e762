import { RedisProcess } from '@animal-store/tests/support/redis.js';
import { freePort } from '@animal-store/tests/support/runtime.js';
import { connect } from 'nats';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startDelayProxy, superclusterConfig } from '../../../../bench/region-links.mjs';
import { MemoryCustomerStore } from '../../src/customers/memory-customer-store.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import type { RegionSync } from '../../src/regions/region-sync.js';
import { auth } from '../support/admin.js';
import { addKey, bearer, startEchoUpstream, startGateway, type TestGateway } from '../support/helpers.js';
import { NatsProcess } from '../support/nats.js';

/**
 * Three regions' NATS servers joined as a supercluster, each NATS gateway link through a proxy
 * that can cut one region off (bench/region-links.mjs), as an ocean cable fails: the region's own
 * NATS stays up, only the way to the stream's region goes. The regions run at REGION_SYNC_MS's
 * default, REGION_STALE_MS at 2 s rather than 3 intervals: beside the other suites' workers a late
 * interval made a healed region look cut off again for a moment. Each gateway has its own Redis
 * prefix on one redis-server: its counts are its own.
 */
const ENV = { REGION_STALE_MS: '2000', BAN_THRESHOLD: '1000000' };
const REGIONS = ['eu', 'us', 'ap'] as const;
type Region = (typeof REGIONS)[number];
const MINUTE_MS = 60_000;
const at = Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS + 1_000;
const windowId = Math.floor(at / MINUTE_MS);
/**
 * The gateways' clock: still until the test starts, then running from second 1 of one aligned
 * minute, so a silent region's sync age grows (that is how a cut is noticed) and every request of
 * the test falls in the one minute.
 */
let startedAt: number | undefined;
const now = () => (startedAt === undefined ? at : at + Date.now() - startedAt);

type Proxy = Awaited<ReturnType<typeof startDelayProxy>>;
const proxies = {} as Record<Region, Proxy>;
const servers: NatsProcess[] = [];
const gateways = {} as Record<Region, TestGateway>;
let redis: RedisProcess;
let upstream: Awaited<ReturnType<typeof startEchoUpstream>>;

const sync = (r: Region): RegionSync => {
  const regions = gateways[r].deps.regions;
  if (!regions) throw new Error('the test gateway has no region sync');
  return regions;
};

beforeAll(async () => {
  const ports = {} as Record<Region, Record<'client' | 'http' | 'route' | 'gateway' | 'proxy', number>>;
  for (const r of REGIONS) {
    const gateway = await freePort();
    proxies[r] = await startDelayProxy({ target: { host: '127.0.0.1', port: gateway }, delayMs: 5 });
    ports[r] = {
      client: await freePort(),
      http: await freePort(),
      route: await freePort(),
      gateway,
      proxy: proxies[r].port,
    };
  }
  for (const r of REGIONS)
    servers.push(await NatsProcess.fromConfig(ports[r].client, (dir) => superclusterConfig(r, ports, dir)));
  [redis, upstream] = await Promise.all([RedisProcess.start(), startEchoUpstream()]);
  const keyStore = new MemoryKeyStore();
  const customerStore = new MemoryCustomerStore();
  for (const [i, r] of REGIONS.entries()) {
    gateways[r] = await startGateway({
      redisUrl: redis.url,
      upstream: upstream.url,
      keyStore,
      customerStore,
      now,
      env: { NATS_URL: servers[i]?.url ?? '', REGION: r, ...ENV },
    });
    // eu makes the stream, so it lives in eu: ap's counts reach us through eu.
    await vi.waitFor(() => expect(sync(r).counts.connected).toBe(true), { timeout: 30_000, interval: 50 });
  }
  await vi.waitFor(() => expect(REGIONS.map((r) => heardOf(r))).toEqual([2, 2, 2]), { timeout: 60_000, interval: 50 });
}, 120_000);

/** How many other regions `r` hears now. */
const heardOf = (r: Region) =>
  sync(r)
    .status()
    .regions.filter((v) => !v.partitioned).length;

afterAll(async () => {
  await Promise.allSettled(REGIONS.map((r) => gateways[r]?.close()));
  await Promise.allSettled([...servers.map((s) => s.remove()), redis?.stop(), upstream?.close()]);
  await Promise.allSettled(REGIONS.map((r) => proxies[r]?.close()));
});

async function admitted(r: Region, key: string, n: number): Promise<number> {
  let ok = 0;
  for (let i = 0; i < n; i++) {
    const res = await gateways[r].app.inject({ url: '/v1/pets', headers: bearer(key) });
    if (res.statusCode === 200) ok++;
    else expect(res.statusCode).toBe(429);
  }
  return ok;
}

function cut(region: Region, heal = false): void {
  for (const other of REGIONS.filter((r) => r !== region)) {
    proxies[other][heal ? 'heal' : 'cut'](region);
    proxies[region][heal ? 'heal' : 'cut'](other);
  }
}

describe('a region cut off from the stream’s region, and the link healed', () => {
  it('enforces shares while cut, then hears the others again within seconds and ends them', async () => {
    startedAt = Date.now();
    const { id, key } = await addKey(gateways.eu.deps, 'pro', { perMinute: 90 });
    const subject = `k:${id}`;
    cut('ap');
    await vi.waitFor(() => expect(sync('ap').status().partitioned).toBe(true), { timeout: 15_000, interval: 20 });
    // ap may fill its third of the 90 left when it found itself cut off, eu the same.
    expect(await admitted('ap', key, 40)).toBe(30);
    expect(await admitted('eu', key, 10)).toBe(10);
    // Long enough for what eu sends ap meanwhile to be lost, as on a cable cut of minutes: ap's
    // consumer then has a gap to mend, not only a link to wait for.
    await new Promise((resolve) => setTimeout(resolve, 5_000));

    cut('ap', true);
    // nats.js's ordered consumer waits about its pull's expiry before it tries again: at its
    // 30 s default ap went unheard of and deaf for 32 s after the heal (npm run bench:regions).
    await vi.waitFor(
      () => {
        expect(sync('ap').counts.remoteCount(subject, 'minute', windowId)).toBe(10);
        expect(sync('eu').counts.remoteCount(subject, 'minute', windowId)).toBe(30);
        expect(sync('us').counts.remoteCount(subject, 'minute', windowId)).toBe(40);
      },
      { timeout: 10_000, interval: 20 },
    );
    await vi.waitFor(
      async () => {
        const view = await gateways.ap.admin.inject({ url: '/admin/regions', headers: auth });
        expect(view.json()).toMatchObject({ region: 'ap', partitioned: false, sharesInForce: 0 });
        expect(REGIONS.map((r) => sync(r).status().partitioned)).toEqual([false, false, false]);
      },
      { timeout: 5_000, interval: 20 },
    );
    // The shares ended and nothing was counted twice: the 50 left go to whoever asks.
    expect(await admitted('us', key, 60)).toBe(50);
  }, 60_000);
});

/** The stream's subjects and limits as the gateways make it (regions/region-sync.ts). */
const STREAM = { name: 'GATEWAY_REGIONS', subjects: ['gateway.regions.>'], max_msgs_per_subject: 1 };

describe('the two feeds of counts, each alone', () => {
  it('the stream: a gateway started after a count was published learns it at once', async () => {
    const { id } = await addKey(gateways.eu.deps, 'pro', { perMinute: 90 });
    const nc = await connect({ servers: servers[0]?.url ?? '' });
    // A source of eu that published once and never again: only the stream still has its count.
    const message = { region: 'eu', source: 'eu-gone', entries: [[`k:${id}`, 'minute', windowId, 7, at + 3_600_000]] };
    await nc.jetstream().publish('gateway.regions.eu.eu-gone', JSON.stringify(message));
    await nc.close();
    // A second gateway of region ap, so no region is new to the others when it goes.
    const late = await startGateway({
      redisUrl: redis.url,
      upstream: upstream.url,
      keyStore: gateways.eu.deps.keyStore,
      customerStore: gateways.eu.deps.customerStore,
      now,
      env: { NATS_URL: servers[2]?.url ?? '', REGION: 'ap', ...ENV },
    });
    try {
      const counts = late.deps.regions?.counts;
      await vi.waitFor(() => expect(counts?.remoteCount(`k:${id}`, 'minute', windowId)).toBe(7), {
        timeout: 10_000,
        interval: 20,
      });
    } finally {
      await late.close();
    }
  });

  it('core NATS: with the stream gone (JetStream away), the regions still hear each other', async () => {
    const { id, key } = await addKey(gateways.eu.deps, 'pro', { perMinute: 90 });
    const nc = await connect({ servers: servers[0]?.url ?? '' });
    const jsm = await nc.jetstreamManager();
    await jsm.streams.delete(STREAM.name);
    try {
      expect(await admitted('eu', key, 12)).toBe(12);
      // The interval's publish gets no ack now, but its message still reaches every subscriber.
      await vi.waitFor(
        () => {
          for (const r of ['us', 'ap'] as const)
            expect(sync(r).counts.remoteCount(`k:${id}`, 'minute', windowId)).toBe(12);
        },
        { timeout: 10_000, interval: 20 },
      );
    } finally {
      await jsm.streams.add(STREAM);
      await nc.close();
    }
  });
});
