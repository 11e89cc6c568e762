import { RedisProcess } from '@animal-store/tests/support/redis.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { MemoryCustomerStore } from '../../src/customers/memory-customer-store.js';
import { createKey } from '../../src/keys/create-key.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import type { RegionSync } from '../../src/regions/region-sync.js';
import { auth, expectError } from '../support/admin.js';
import { addKey, bearer, startEchoUpstream, startGateway, type TestGateway } from '../support/helpers.js';
import { NatsProcess } from '../support/nats.js';

/**
 * Two regions, each a gateway on its own Redis, sharing one nats-server with JetStream, for one
 * key. The test steps the exchange itself (publish, then wait until each region holds the other's
 * last count), so a round of requests is one sync interval and the figures do not hang on timing.
 */
const LIMIT = 100;
const MINUTE_MS = 60_000;

let nats: NatsProcess;
let redisEu: RedisProcess;
let redisUs: RedisProcess;
let upstream: Awaited<ReturnType<typeof startEchoUpstream>>;
let eu: TestGateway;
let us: TestGateway;
// Frozen: every request of a test falls in one aligned minute (the gateways' Redis TTLs run on).
const at = Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS + 1_000;
const now = () => at;

beforeAll(async () => {
  [nats, redisEu, redisUs, upstream] = await Promise.all([
    NatsProcess.start(),
    RedisProcess.start(),
    RedisProcess.start(),
    startEchoUpstream(),
  ]);
  // One key store, as the regions' MongoDB would be: the key is the same key in both.
  const keyStore = new MemoryKeyStore();
  const customerStore = new MemoryCustomerStore();
  const region = async (name: string, redis: RedisProcess) =>
    startGateway({
      redisUrl: redis.url,
      upstream: upstream.url,
      keyStore,
      customerStore,
      now,
      env: {
        NATS_URL: nats.url,
        REGION: name,
        REGION_SYNC_MS: '1000',
        REGION_STALE_MS: '600000',
        // Refusals here are the point, not bans.
        BAN_THRESHOLD: '1000000',
      },
    });
  [eu, us] = await Promise.all([region('eu', redisEu), region('us', redisUs)]);
  await vi.waitFor(() => expect([sync(eu).counts.connected, sync(us).counts.connected]).toEqual([true, true]), {
    timeout: 10_000,
    interval: 20,
  });
}, 60_000);

afterAll(async () => {
  await Promise.allSettled([eu?.close(), us?.close()]);
  await Promise.allSettled([nats?.remove(), redisEu?.stop(), redisUs?.stop(), upstream?.close()]);
});

afterEach(async () => {
  // A test that cut the link leaves it healed for the next.
  if (!nats.running) await nats.restart();
});

function sync(gw: TestGateway): RegionSync {
  const regions = gw.deps.regions;
  if (!regions) throw new Error('the test gateway has no region sync');
  return regions;
}

async function newKey(): Promise<{ id: string; key: string }> {
  return addKey(eu.deps, 'pro', { perMinute: LIMIT });
}

/** `n` requests of the key in one region: how many it admitted (200; a refusal is 429). */
async function send(gw: TestGateway, key: string, n: number): Promise<number> {
  let admitted = 0;
  for (let i = 0; i < n; i++) {
    const res = await gw.app.inject({ method: 'GET', url: '/v1/pets', headers: bearer(key) });
    if (res.statusCode === 200) admitted++;
    else expect(res.statusCode).toBe(429);
  }
  return admitted;
}

const windowId = Math.floor(at / MINUTE_MS);
/** A key's window (`k:<key>`), or a customer's shared one for a subject given whole (`c:<customer>`). */
const subject = (id: string) => (id.startsWith('c:') ? id : `k:${id}`);
const own = (gw: TestGateway, id: string) => sync(gw).counts.ownCount(subject(id), 'minute', windowId);
const heard = (gw: TestGateway, id: string) => sync(gw).counts.remoteCount(subject(id), 'minute', windowId);

/**
 * One sync interval: both regions publish, and each then holds the other's count. A publish is
 * tried again until JetStream takes it, as the interval's would be: just after a NATS restart the
 * connection is back before the stream is (a publish timed out there on a loaded machine).
 */
async function exchange(id: string): Promise<void> {
  await vi.waitFor(() => Promise.all([sync(eu).publish(), sync(us).publish()]), { timeout: 20_000, interval: 100 });
  await vi.waitFor(() => expect([heard(eu, id), heard(us, id)]).toEqual([own(us, id), own(eu, id)]), {
    timeout: 10_000,
    interval: 10,
  });
}

describe('limits across two regions over NATS JetStream', () => {
  it('admits at most the limit plus the stated bound at steady even traffic', async () => {
    const { id, key } = await newKey();
    // 7 requests per region per interval: r × s = 14, so the bound (R − 1)/R × r × (s + d) is 7.
    const perRound = 7;
    let admitted = 0;
    for (let round = 0; round < 30; round++) {
      const [a, b] = await Promise.all([send(eu, key, perRound), send(us, key, perRound)]);
      admitted += a + b;
      await exchange(id);
    }
    expect(admitted).toBeGreaterThanOrEqual(LIMIT);
    expect(admitted).toBeLessThanOrEqual(LIMIT + perRound);
    expect(own(eu, id) + own(us, id)).toBe(admitted);
    console.info(`regions: steady even traffic admitted ${admitted} of ${LIMIT} (${admitted / LIMIT})`);
  });

  it('admits exactly the limit when all traffic is in one region, and the other then refuses', async () => {
    const { id, key } = await newKey();
    let admitted = 0;
    for (let round = 0; round < 12; round++) {
      admitted += await send(eu, key, 10);
      await exchange(id);
    }
    expect(admitted).toBe(LIMIT);
    expect(await send(us, key, 10)).toBe(0);
  });

  it('shares a customer’s window between its keys in two regions', async () => {
    const customerId = 'cus_Regions000000001';
    await eu.deps.customerStore.insert({
      id: customerId,
      name: 'Two regions',
      plan: 'pro',
      limits: { perMinute: LIMIT },
      billing: { anchorDay: 1, timeZone: 'UTC' },
      createdAt: new Date(at).toISOString(),
    });
    const keys = [0, 1].map(() => createKey({ plan: 'pro', name: 'regional' }));
    for (const { record } of keys) await eu.deps.keyStore.insert({ ...record, customerId });
    const [euKey, usKey] = keys.map(({ key }) => key) as [string, string];
    let admitted = 0;
    for (let round = 0; round < 10; round++) {
      const [a, b] = await Promise.all([send(eu, euKey, 7), send(us, usKey, 7)]);
      admitted += a + b;
      await exchange(`c:${customerId}`);
    }
    expect(admitted).toBeGreaterThanOrEqual(LIMIT);
    expect(admitted).toBeLessThanOrEqual(LIMIT + 7);
    console.info(`regions: a customer's window across two regions admitted ${admitted} of ${LIMIT}`);
  });

  it('publishes on its own every REGION_SYNC_MS: the other region learns the count without a step', async () => {
    const { id, key } = await newKey();
    expect(await send(eu, key, 30)).toBe(30);
    await vi.waitFor(() => expect(heard(us, id)).toBe(30), { timeout: 10_000, interval: 20 });
    expect(await send(us, key, 80)).toBe(70);
  });

  it('enforces shares while the link is cut, ends them when it heals, and counts converge', async () => {
    const { id, key } = await newKey();
    let admitted = (await send(eu, key, 20)) + (await send(us, key, 20));
    await exchange(id);
    const regions = await eu.admin.inject({ method: 'GET', url: '/admin/regions', headers: auth });
    expect(regions.statusCode).toBe(200);
    expect(regions.json()).toMatchObject({ region: 'eu', partitioned: false, sharesInForce: 0 });
    expect(regions.json().regions).toEqual([expect.objectContaining({ region: 'us', partitioned: false })]);

    await nats.stop();
    await vi.waitFor(() => expect([sync(eu).counts.connected, sync(us).counts.connected]).toEqual([false, false]), {
      timeout: 10_000,
      interval: 20,
    });
    expectError(
      await eu.admin.inject({ method: 'GET', url: '/admin/regions', headers: auth }),
      503,
      'store_unavailable',
    );
    // Each region may fill its share (half the limit) less what it already took: 30 each.
    const [a, b] = await Promise.all([send(eu, key, 60), send(us, key, 60)]);
    expect([a, b]).toEqual([30, 30]);
    admitted += a + b;
    expect(admitted).toBeLessThanOrEqual(LIMIT);
    // Its minute and its day (the plan's 10,000 a day, shared 5,000 each).
    expect(sync(eu).status()).toMatchObject({ partitioned: true, sharesInForce: 2 });
    const metrics = await eu.deps.registry.metrics();
    expect(metrics).toMatch(/^gateway_region_partitioned\{service="gateway"\} 1$/m);
    expect(metrics).toMatch(/^gateway_region_shares_in_force\{service="gateway"\} 2$/m);
    expect(metrics).toMatch(/^gateway_region_sync_lag_seconds\{region="us",service="gateway"\} \d/m);

    await nats.restart();
    await vi.waitFor(() => expect([sync(eu).counts.connected, sync(us).counts.connected]).toEqual([true, true]), {
      timeout: 15_000,
      interval: 20,
    });
    await exchange(id);
    expect(heard(eu, id)).toBe(own(us, id));
    expect(heard(us, id)).toBe(own(eu, id));
    const healed = await eu.admin.inject({ method: 'GET', url: '/admin/regions', headers: auth });
    expect(healed.json()).toMatchObject({ partitioned: false, sharesInForce: 0 });
    expect(await eu.deps.registry.metrics()).toMatch(/^gateway_region_partitioned\{service="gateway"\} 0$/m);
    expect(await send(eu, key, 5)).toBe(0);
  }, 60_000);

  it('never refuses after a heal for counts it has already taken (no double count)', async () => {
    const { id, key } = await newKey();
    let admitted = (await send(eu, key, 20)) + (await send(us, key, 20));
    await exchange(id);
    await nats.stop();
    await vi.waitFor(() => expect(sync(eu).counts.connected).toBe(false), { timeout: 10_000, interval: 20 });
    admitted += (await send(eu, key, 10)) + (await send(us, key, 10));
    await nats.restart();
    await vi.waitFor(() => expect([sync(eu).counts.connected, sync(us).counts.connected]).toEqual([true, true]), {
      timeout: 15_000,
      interval: 20,
    });
    await exchange(id);
    // 60 taken: the rest of the limit is still there, to the unit, whichever region asks.
    admitted += await send(eu, key, 50);
    expect(admitted).toBe(LIMIT);
  }, 60_000);
});
