import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRegistry } from '@animal-store/common/metrics.js';
import { generateApiKey, hashApiKey } from '@animal-store/gateway/keys/api-key.js';
import { buildApp as buildPets } from '@animal-store/pets/app.js';
import { MemoryPetStore } from '@animal-store/pets/store/memory-pet-store.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { adminClient } from '../support/admin-client.js';
import { RedisProcess, redisServerBinary } from '../support/redis.js';
import { type RequestLoops, startLoops, tally } from '../support/request-loop.js';
import { freePort } from '../support/runtime.js';
import { killAllServices, ServiceProcess } from '../support/service-process.js';

/*
 * Requests served while Redis stalls (SIGSTOP) are neither given away nor forgotten
 * (docs/limits-and-bans.md#when-redis-is-away): a key that pays with credits is refused while the
 * balance cannot be read (it never gets past what it paid for), and what a key without credits is
 * served meanwhile reaches its usage history once Redis answers again, each request once, also
 * from a replica that died before Redis came back.
 */

const COMMAND_TIMEOUT_MS = 200;
const STALL_MS = 5_000;
const BALANCE = 4_000;
const ADMIN_TOKEN = 'stall-test-admin-token-0123456789abcdef';
const PAYING = { id: 'key_paying', key: generateApiKey() };
const FREE = { id: 'key_free', key: generateApiKey() };

type Pets = ReturnType<typeof buildPets>;

describe('usage across a Redis stall under load', () => {
  let dir: string;
  let pets: Pets;
  let petsUrl: string;
  const redises: RedisProcess[] = [];

  beforeAll(async () => {
    // The test stops and resumes its own redis-server: REDIS_URL cannot stand in for it.
    redisServerBinary();
    dir = await mkdtemp(join(tmpdir(), 'faults-stall-'));
    await writeFile(join(dir, 'plans.json'), JSON.stringify({ plans: { bulk: { windows: { minute: 1_000_000 } } } }));
    await writeFile(
      join(dir, 'keys.json'),
      JSON.stringify([
        { id: PAYING.id, name: 'paying', plan: 'bulk', sha256: hashApiKey(PAYING.key), credits: {} },
        { id: FREE.id, name: 'free', plan: 'bulk', sha256: hashApiKey(FREE.key) },
      ]),
    );
    pets = buildPets({ logLevel: 'silent' }, { store: new MemoryPetStore(), registry: createRegistry('pets', false) });
    await pets.listen({ host: '127.0.0.1', port: 0 });
    petsUrl = `http://127.0.0.1:${(pets.server.address() as AddressInfo).port}`;
  });

  afterEach(async () => {
    await killAllServices();
    // SIGKILL ends a stopped (SIGSTOP) redis-server too.
    await Promise.all(redises.splice(0).map((r) => r.kill()));
  });

  afterAll(async () => {
    await pets?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Each gateway's admin listener, by the gateway. */
  const adminPorts = new Map<ServiceProcess, number>();
  const adminUrl = (gw: ServiceProcess) => `http://127.0.0.1:${adminPorts.get(gw)}`;

  async function gateway(redis: RedisProcess, spoolDir: string): Promise<ServiceProcess> {
    const adminPort = await freePort();
    const gw = await ServiceProcess.start(
      'gateway',
      {
        REDIS_URL: redis.url,
        PETS_URL: petsUrl,
        PLANS_FILE: join(dir, 'plans.json'),
        API_KEYS_FILE: join(dir, 'keys.json'),
        RATE_LIMIT_FAILURE_MODE: 'open',
        REDIS_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS),
        USAGE_SPOOL_DIR: spoolDir,
        ADMIN_TOKEN,
        ADMIN_PORT: String(adminPort),
      },
      { ready: '/readyz' },
    );
    adminPorts.set(gw, adminPort);
    return gw;
  }

  const admin = (gw: ServiceProcess, path: string, body?: object) =>
    adminClient(() => adminUrl(gw), ADMIN_TOKEN).call(path, body);
  const topUp = (gw: ServiceProcess, id: string, amount: number) =>
    adminClient(() => adminUrl(gw), ADMIN_TOKEN).topUp(id, amount);

  const admitted = async (gw: ServiceProcess, id: string): Promise<number> =>
    ((await admin(gw, `/admin/keys/${id}/usage/history`)).totals as { admitted: number }).admitted;

  const balance = async (gw: ServiceProcess): Promise<number> =>
    (await admin(gw, `/admin/keys/${PAYING.id}/credits`)).balance as number;

  function load(gw: ServiceProcess, key: string): RequestLoops {
    return startLoops({
      concurrency: 6,
      timeoutMs: 10_000,
      request: () => ({ url: `${gw.url}/v1/pets?limit=1`, headers: { authorization: `Bearer ${key}` } }),
    });
  }

  const served = (loops: RequestLoops) => loops.outcomes.filter((o) => o.status === 200).length;

  /** Both keys under load through a stall of STALL_MS; `during` runs while Redis is stopped. */
  async function throughStall(gw: ServiceProcess, redis: RedisProcess, during: () => Promise<void> = async () => {}) {
    const paying = load(gw, PAYING.key);
    const free = load(gw, FREE.key);
    await vi.waitFor(() => expect(served(paying) + served(free)).toBeGreaterThanOrEqual(200), { timeout: 10_000 });
    redis.freeze();
    const stoppedAt = Date.now();
    let thawingAt = Number.POSITIVE_INFINITY;
    try {
      await new Promise((r) => setTimeout(r, STALL_MS));
      await during();
    } finally {
      // Taken before SIGCONT: an answer that arrived before it cannot have come from Redis.
      thawingAt = Date.now();
      redis.thaw();
    }
    const thawedAt = Date.now();
    // Served again from Redis: the loops run on a little past the stall.
    await vi.waitFor(() => expect(paying.since(thawedAt).filter((o) => o.status !== 503).length).toBeGreaterThan(20), {
      timeout: 10_000,
    });
    const [payingOutcomes, freeOutcomes] = await Promise.all([paying.stop(), free.stop()]);
    // In the stall: sent after SIGSTOP and answered before SIGCONT. A request sent in the stall's
    // last instants may be answered by Redis within its command deadline once Redis resumes, and
    // rightly served from the balance then (CI saw 6 such 200s under full-suite load).
    const inStall = (o: { start: number; end: number }) => o.start >= stoppedAt && o.end < thawingAt;
    return {
      paying: { all: tally(payingOutcomes), stall: tally(payingOutcomes.filter(inStall)), ok: served(paying) },
      free: { all: tally(freeOutcomes), stall: tally(freeOutcomes.filter(inStall)), ok: served(free) },
    };
  }

  it('serves a paying key no further than its balance, and every 200 of the stall reaches the history once', async () => {
    const redis = await RedisProcess.start();
    redises.push(redis);
    const spool = join(dir, 'spool-one');
    const gw = await gateway(redis, spool);
    await topUp(gw, PAYING.id, BALANCE);

    const seen = await throughStall(gw, redis);
    const left = await balance(gw);
    const counts = {
      seen,
      creditsSpent: BALANCE - left,
      history: { paying: await admitted(gw, PAYING.id), free: await admitted(gw, FREE.id) },
    };
    console.log(`redis stall (${STALL_MS} ms, one replica): ${JSON.stringify(counts)}`);
    // Credits are money: never served past the balance.
    expect(counts.creditsSpent).toBeLessThanOrEqual(BALANCE);
    // While the balance could not be read, the paying key was refused, in the Error shape.
    expect(seen.paying.stall['200'] ?? 0, JSON.stringify(counts)).toBe(0);
    expect(seen.paying.stall['503'], JSON.stringify(counts)).toBeGreaterThan(0);
    // The free key was served through the stall, and each of its 200s reaches the history once
    // the spool is replayed (polled, not waited for).
    expect(seen.free.stall['200'], JSON.stringify(counts)).toBeGreaterThan(0);
    // Each 200 paid once: a call that ran in the stall but was answered without it (its reply
    // late) has its credits given back and its counts taken back (RedisKeyLimiter's unanswered),
    // in the next second's batch.
    await vi.waitFor(
      async () => {
        expect(await admitted(gw, FREE.id)).toBe(seen.free.ok);
        expect(await admitted(gw, PAYING.id)).toBe(seen.paying.ok);
        expect(BALANCE - (await balance(gw))).toBe(seen.paying.ok);
      },
      { timeout: 20_000, interval: 200 },
    );
    const replayed = {
      paying: await admitted(gw, PAYING.id),
      free: await admitted(gw, FREE.id),
      creditsSpent: BALANCE - (await balance(gw)),
    };
    // How many calls ran in the stall but came back too late (taken back, refunded): it varies.
    const lateReplies = gw
      .output()
      .split('\n')
      .filter((line) => line.includes('answered after its timeout had run'));
    console.log(
      `redis stall: after the spool's replay ${JSON.stringify(replayed)}, late replies ${lateReplies.length}`,
    );
  }, 90_000);

  it('keeps what a replica served in the stall through its death, written once by its successor', async () => {
    const redis = await RedisProcess.start();
    redises.push(redis);
    const spool = join(dir, 'spool-two');
    const first = await gateway(redis, spool);
    const free = load(first, FREE.key);
    await vi.waitFor(() => expect(served(free)).toBeGreaterThanOrEqual(100), { timeout: 10_000 });
    redis.freeze();
    let spooled: string[] = [];
    let outcomes: Awaited<ReturnType<RequestLoops['stop']>>;
    try {
      await new Promise((r) => setTimeout(r, STALL_MS));
      outcomes = await free.stop();
      spooled = await readdir(spool);
      // Killed while Redis is still stopped: what it served in the stall is only in its spool.
      await first.kill();
    } finally {
      redis.thaw();
    }
    const ok = outcomes.filter((o) => o.status === 200).length;
    expect(tally(outcomes)).toEqual({ '200': outcomes.length });
    expect(spooled.length).toBeGreaterThan(0);
    const successor = await gateway(redis, spool);
    await vi.waitFor(async () => expect(await admitted(successor, FREE.id)).toBe(ok), {
      timeout: 20_000,
      interval: 200,
    });
    console.log(
      `redis stall then a replica's death: ${JSON.stringify({ served: ok, spooledFiles: spooled.length, history: await admitted(successor, FREE.id) })}`,
    );
    await vi.waitFor(async () => expect(await readdir(spool)).toEqual([]), { timeout: 5_000 });
  }, 120_000);
});
