import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { createRegistry } from '@animal-store/common/metrics.js';
import { buildApp as buildPets } from '@animal-store/pets/app.js';
import { MemoryPetStore } from '@animal-store/pets/store/memory-pet-store.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { RedisProcess, redisServerBinary } from '../support/redis.js';
import { RedisInspector } from '../support/redis-inspect.js';
import { type Outcome, startLoops, tally } from '../support/request-loop.js';
import { createKeyInFile, killAllServices, metricValue, ServiceProcess } from '../support/service-process.js';

/**
 * Redis failing under a running gateway process: killed (connection refused), restarted on the
 * same port, and frozen (SIGSTOP: connections stay open, nothing answers). The gateway must keep
 * answering within its Redis command timeout, count and log the fallback once per outage, and
 * resume shared limits without a reconnect storm.
 */

const COMMAND_TIMEOUT_MS = 200;
/** No request may wait on Redis longer than the command timeout; a second of slack for the rest. */
const BOUND_MS = COMMAND_TIMEOUT_MS + 1_000;
/** How long Redis stays dead: long enough for ioredis to back off to its cap (about 1 s) twice. */
const OUTAGE_MS = 2_500;
const FAILING = 'Redis rate limiter failing';
const RECOVERED = 'Redis rate limiter recovered';

type Pets = ReturnType<typeof buildPets>;

/** Log records at error level or above (pino 50+) read since index `from`. */
function errorLines(service: ServiceProcess, from: number) {
  return service.logs.slice(from).filter((l) => Number(l.json?.level) >= 50);
}

describe('gateway with Redis failing', () => {
  let dir: string;
  let pets: Pets;
  let petsUrl: string;
  let keysFile: string;
  let key: string;
  const redises: RedisProcess[] = [];
  const inspectors: RedisInspector[] = [];

  beforeAll(async () => {
    // These tests kill and restart their own redis-server: REDIS_URL cannot stand in for it.
    redisServerBinary();
    dir = await mkdtemp(join(tmpdir(), 'faults-redis-'));
    keysFile = join(dir, 'keys.json');
    ({ key } = await createKeyInFile(keysFile));
    pets = buildPets({ logLevel: 'silent' }, { store: new MemoryPetStore(), registry: createRegistry('pets', false) });
    await pets.listen({ host: '127.0.0.1', port: 0 });
    petsUrl = `http://127.0.0.1:${(pets.server.address() as AddressInfo).port}`;
  });

  afterEach(async () => {
    for (const inspector of inspectors.splice(0)) inspector.close();
    await killAllServices();
    // SIGKILL ends a stopped (SIGSTOP) redis-server too.
    await Promise.all(redises.splice(0).map((r) => r.kill()));
  });

  afterAll(async () => {
    await pets?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const auth = () => ({ authorization: `Bearer ${key}` });

  async function metrics(gateway: ServiceProcess): Promise<string> {
    const res = await fetch(`${gateway.metricsUrl}/metrics`, { signal: AbortSignal.timeout(BOUND_MS) });
    expect(res.status).toBe(200);
    return res.text();
  }

  async function decisions(gateway: ServiceProcess, source: string, decision?: string): Promise<number> {
    return metricValue(await metrics(gateway), 'gateway_rate_limit_decisions_total', {
      source,
      ...(decision ? { decision } : {}),
    });
  }

  async function inspect(redis: RedisProcess): Promise<RedisInspector> {
    const inspector = await RedisInspector.connect(redis.port);
    inspectors.push(inspector);
    return inspector;
  }

  /** A Redis of its own and a gateway process on it, deciding from Redis before it returns. */
  async function stack(mode: 'open' | 'closed'): Promise<{ redis: RedisProcess; gateway: ServiceProcess }> {
    const redis = await RedisProcess.start();
    redises.push(redis);
    const gateway = await ServiceProcess.start('gateway', {
      REDIS_URL: redis.url,
      PETS_URL: petsUrl,
      API_KEYS_FILE: keysFile,
      RATE_LIMIT_FAILURE_MODE: mode,
      REDIS_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS),
      LOG_LEVEL: 'info',
    });
    await vi.waitFor(
      async () => {
        const res = await fetch(`${gateway.url}/v1/pets?limit=1`, { headers: auth() });
        expect(res.status).toBe(200);
        expect(await decisions(gateway, 'shared')).toBeGreaterThan(0);
      },
      { timeout: 5_000, interval: 50 },
    );
    return { redis, gateway };
  }

  function load(gateway: ServiceProcess, concurrency = 4) {
    return startLoops({
      concurrency,
      timeoutMs: 10_000,
      request: () => ({ url: `${gateway.url}/v1/pets?limit=1`, headers: auth() }),
    });
  }

  /** Every outcome is a response (no transport error, no client timeout) that came within the bound. */
  function expectAllAnsweredWithin(outcomes: Outcome[], boundMs: number): void {
    const broken = outcomes.filter((o) => o.error !== undefined);
    expect(broken, JSON.stringify(tally(outcomes))).toEqual([]);
    const slowest = Math.max(...outcomes.map((o) => o.end - o.start));
    expect(slowest, `slowest of ${outcomes.length} requests`).toBeLessThanOrEqual(boundMs);
  }

  it('open mode: serves through a Redis crash from the fallback, counts and logs it once, and resumes shared limits within 5 s after a restart without a reconnect storm', async () => {
    const { redis, gateway } = await stack('open');
    const loops = load(gateway);
    await vi.waitFor(() => expect(loops.outcomes.length).toBeGreaterThanOrEqual(20));
    const errorsBefore = metricValue(await metrics(gateway), 'gateway_redis_errors_total');
    const logMark = gateway.logs.length;

    await redis.kill();
    const killedAt = Date.now();
    await vi.waitFor(async () => expect(await decisions(gateway, 'fallback', 'admitted')).toBeGreaterThanOrEqual(20), {
      timeout: 5_000,
      interval: 50,
    });
    // Readiness does not depend on Redis in open mode: the replica can serve, so it stays in rotation.
    const ready = await fetch(`${gateway.url}/readyz`, { signal: AbortSignal.timeout(BOUND_MS) });
    expect(ready.status).toBe(200);
    // A request without a key is limited per IP by its own Redis-backed limiter: still a quick 401.
    const anonymous = await fetch(`${gateway.url}/v1/pets`, { signal: AbortSignal.timeout(BOUND_MS) });
    expect(anonymous.status).toBe(401);
    expect(((await anonymous.json()) as { code: string }).code).toBe('missing_api_key');
    await delay(OUTAGE_MS - (Date.now() - killedAt));

    const outage = await metrics(gateway);
    expect(metricValue(outage, 'gateway_redis_errors_total')).toBeGreaterThan(errorsBefore);
    const sharedBefore = metricValue(outage, 'gateway_rate_limit_decisions_total', { source: 'shared' });
    const fallbackDuringOutage = metricValue(outage, 'gateway_rate_limit_decisions_total', { source: 'fallback' });

    await redis.restart();
    const restartedAt = Date.now();
    const inspector = await inspect(redis);
    await vi.waitFor(
      async () => {
        expect(await decisions(gateway, 'shared')).toBeGreaterThan(sharedBefore);
        expect(await inspector.commandCalls('evalsha')).toBeGreaterThan(0);
      },
      { timeout: 5_000, interval: 100 },
    );
    const recoveredAfterMs = Date.now() - restartedAt;
    // Once shared again, it stays shared: the fallback count stops growing.
    const fallbackAtRecovery = await decisions(gateway, 'fallback');
    const evalshaAtRecovery = await inspector.commandCalls('evalsha');
    await vi.waitFor(async () =>
      expect(await inspector.commandCalls('evalsha')).toBeGreaterThan(evalshaAtRecovery + 50),
    );
    const after = await metrics(gateway);
    const outcomes = await loops.stop();

    // The whole run, before, during and after the outage: every request served, none slow.
    expect(tally(outcomes)).toEqual({ '200': outcomes.length });
    expectAllAnsweredWithin(outcomes, BOUND_MS);
    expect(outcomes.filter((o) => o.start >= killedAt && o.start < restartedAt).length).toBeGreaterThan(20);

    // The fallback counted while Redis was away, and stopped once it was back.
    expect(fallbackDuringOutage).toBeGreaterThanOrEqual(20);
    const fallbackAtEnd = metricValue(after, 'gateway_rate_limit_decisions_total', { source: 'fallback' });
    // At most the requests that were in flight when recovery was seen (one per loop).
    expect(fallbackAtEnd - fallbackAtRecovery).toBeLessThanOrEqual(4);

    // Logged once for the outage, not per request; and its end logged once (its line may still be
    // in the process's log buffer, written within 500 ms).
    await vi.waitFor(() => expect(gateway.messages(RECOVERED, logMark).length).toBeGreaterThan(0), { timeout: 2_000 });
    const notable = gateway.logs.slice(logMark).filter((l) => Number(l.json?.level) >= 40);
    const context = notable.map((l) => l.raw).join('\n');
    expect(gateway.messages(FAILING, logMark), context).toHaveLength(1);
    expect(gateway.messages(FAILING, logMark)[0]?.raw).toContain('fallback');
    expect(gateway.messages(RECOVERED, logMark), context).toHaveLength(1);
    expect(errorLines(gateway, logMark), context).toHaveLength(1);

    // Connections the restarted Redis accepted over the recovery: restart's PING probe, this
    // inspector, and the gateway's command and subscriber connections; a storm would be many more.
    const connections = Number((await inspector.info('stats')).total_connections_received);
    expect(connections).toBeLessThanOrEqual(10);
    expect(recoveredAfterMs).toBeLessThan(5_000);
    expect(gateway.alive).toBe(true);
  });

  it('closed mode: answers 503 rate_limiter_unavailable within the timeout while Redis is down, and 200 again within 5 s of its restart', async () => {
    const { redis, gateway } = await stack('closed');
    const loops = load(gateway, 2);
    await vi.waitFor(() => expect(loops.outcomes.length).toBeGreaterThanOrEqual(10));
    const logMark = gateway.logs.length;

    // Taken before the kill: the gateway sees the connection drop (and answers 503) before this
    // process handles the exit, so a request can end refused before `await kill()` returns.
    const killedAt = Date.now();
    await redis.kill();
    await vi.waitFor(() => expect(loops.since(killedAt).filter((o) => o.status === 503).length).toBeGreaterThan(20), {
      timeout: 5_000,
    });
    // Not ready would take every replica out of rotation at once; the 503s already say what is wrong.
    expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200);

    await redis.restart();
    const restartedAt = Date.now();
    await vi.waitFor(() => expect(loops.since(restartedAt).some((o) => o.status === 200)).toBe(true), {
      timeout: 5_000,
      interval: 50,
    });
    const recoveredAfterMs = Date.now() - restartedAt;
    // And stays up: the next requests are all admitted.
    const recoveredAt = Date.now();
    await vi.waitFor(() => expect(loops.since(recoveredAt).length).toBeGreaterThanOrEqual(20));
    const outcomes = await loops.stop();

    expectAllAnsweredWithin(outcomes, BOUND_MS);
    expect(outcomes.filter((o) => o.end < killedAt).every((o) => o.status === 200)).toBe(true);
    expect(
      loops.since(recoveredAt).every((o) => o.status === 200),
      JSON.stringify(tally(loops.since(recoveredAt))),
    ).toBe(true);
    const refused = outcomes.filter((o) => o.status === 503);
    expect(refused.length).toBeGreaterThan(20);
    expect(outcomes.every((o) => o.status === 200 || o.status === 503)).toBe(true);
    for (const o of refused) {
      expect(JSON.parse(o.body ?? '')).toEqual({
        code: 'rate_limiter_unavailable',
        message: expect.any(String),
        status: 503,
      });
      expect(o.headers?.['content-type']).toMatch(/^application\/json/);
      expect(Number(o.headers?.['retry-after'])).toBeGreaterThanOrEqual(1);
      // The plan's minute limit (this key's: 100000), nothing left, reset when to retry.
      expect(o.headers?.['x-ratelimit-limit']).toBe('100000');
      expect(o.headers?.['x-ratelimit-remaining']).toBe('0');
      expect(Number(o.headers?.['x-ratelimit-reset'])).toBeGreaterThanOrEqual(Math.floor(o.start / 1000));
      expect(o.headers?.ratelimit).toBeDefined();
      expect(o.headers?.['ratelimit-policy']).toBeDefined();
    }
    // One error line for the outage; each refused request is an info line like any refusal.
    expect(gateway.messages(FAILING, logMark)).toHaveLength(1);
    expect(errorLines(gateway, logMark).map((l) => l.json?.msg)).toEqual([
      gateway.messages(FAILING, logMark)[0]?.json?.msg,
    ]);
    expect(recoveredAfterMs).toBeLessThan(5_000);
    expect(gateway.alive).toBe(true);
  });

  it('open mode, Redis frozen (accepts, never answers): every request is answered within the command timeout from the fallback, and shared limits resume once it thaws', async () => {
    const { redis, gateway } = await stack('open');
    const inspector = await inspect(redis);
    const pid = Number((await inspector.info('server')).process_id);
    expect(pid).toBeGreaterThan(0);
    const fallbackBefore = await decisions(gateway, 'fallback');
    const logMark = gateway.logs.length;

    process.kill(pid, 'SIGSTOP');
    const stoppedAt = Date.now();
    const loops = load(gateway);
    try {
      await vi.waitFor(() => expect(loops.since(stoppedAt).length).toBeGreaterThanOrEqual(24), {
        timeout: 10_000,
        interval: 50,
      });
      // /metrics asks nothing of Redis: it answers while Redis is frozen.
      expect(await decisions(gateway, 'fallback')).toBeGreaterThanOrEqual(fallbackBefore + 20);
      expect((await fetch(`${gateway.url}/readyz`, { signal: AbortSignal.timeout(BOUND_MS) })).status).toBe(200);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const thawedAt = Date.now();
    const sharedAtThaw = await decisions(gateway, 'shared');
    await vi.waitFor(async () => expect(await decisions(gateway, 'shared')).toBeGreaterThan(sharedAtThaw), {
      timeout: 5_000,
      interval: 50,
    });
    const outcomes = await loops.stop();

    expect(tally(outcomes)).toEqual({ '200': outcomes.length });
    expectAllAnsweredWithin(outcomes, BOUND_MS);
    // The requests during the freeze really waited on Redis (the command timeout), then the fallback
    // answered. Under concurrency they wait up to twice the timeout: ioredis auto-pipelining sends
    // the next batch only once the previous one has settled (timed out), hence the bound's slack.
    const frozen = outcomes.filter((o) => o.start >= stoppedAt && o.end <= thawedAt);
    expect(frozen.length).toBeGreaterThanOrEqual(20);
    expect(Math.max(...frozen.map((o) => o.end - o.start))).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS - 20);
    expect(gateway.messages(FAILING, logMark)).toHaveLength(1);
    expect(gateway.alive).toBe(true);
  });
});
