import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateApiKey, hashApiKey } from '@animal-store/gateway/keys/api-key.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { adminClient } from '../support/admin-client.js';
import { RedisProcess, redisServerBinary, standalone } from '../support/redis.js';
import { freePort } from '../support/runtime.js';
import { killAllServices, ServiceProcess } from '../support/service-process.js';

/*
 * Credits of requests the upstream never served are given back, and their history kept, also when
 * the upstream fails while Redis is away (docs/limits-and-bans.md#when-redis-is-away): the refund
 * and the history's counts wait in the usage spool and are written once Redis answers, each once,
 * also by the successor of a replica that died before Redis came back. What a user sees: the
 * balance after Redis is back is the balance before minus the requests served, and the history
 * bills those alone.
 */

const BALANCE = 100;
const SERVED = 3;
const UNSERVED = 4;
const ADMIN_TOKEN = 'away-refunds-admin-token-0123456789abcdef';
const PAYING = { id: 'key_refunded', key: generateApiKey() };

/** An upstream that answers 200 at once, or (while `holding`) holds each request until released with a 503. */
class Upstream {
  holding = false;
  readonly held: ServerResponse[] = [];
  private readonly server: Server;
  private waiters: Array<() => void> = [];

  constructor() {
    this.server = createServer((_req: IncomingMessage, res: ServerResponse) => {
      if (!this.holding) {
        res.writeHead(200, { 'content-type': 'application/json' }).end('[]');
        return;
      }
      this.held.push(res);
      for (const wake of this.waiters.splice(0)) wake();
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Resolves once `count` requests are held: admitted by the gateway, their credits spent. */
  async holds(count: number): Promise<void> {
    while (this.held.length < count) await new Promise<void>((wake) => this.waiters.push(wake));
  }

  /** Answers every held request 503: the upstream failed them. */
  fail(): void {
    for (const res of this.held.splice(0)) {
      res.writeHead(503, { 'content-type': 'application/json' }).end('{"message":"down"}');
    }
    this.holding = false;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

describe('refunds and history of unserved requests while Redis is away', () => {
  let dir: string;
  let upstream: Upstream;
  let upstreamUrl: string;
  let redis: RedisProcess | undefined;
  const adminPorts = new Map<ServiceProcess, number>();

  beforeAll(async () => {
    // The test stops, kills and restarts its own redis-server: REDIS_URL cannot stand in for it.
    redisServerBinary();
    dir = await mkdtemp(join(tmpdir(), 'faults-away-refunds-'));
    await writeFile(join(dir, 'plans.json'), JSON.stringify({ plans: { bulk: { windows: { minute: 1_000_000 } } } }));
    await writeFile(
      join(dir, 'keys.json'),
      JSON.stringify([{ id: PAYING.id, name: 'paying', plan: 'bulk', sha256: hashApiKey(PAYING.key), credits: {} }]),
    );
    upstream = new Upstream();
    upstreamUrl = await upstream.listen();
  });

  afterEach(async () => {
    await killAllServices();
    // SIGKILL ends a stopped (SIGSTOP) redis-server too.
    await redis?.kill();
    redis = undefined;
  });

  afterAll(async () => {
    await upstream?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** A Redis that keeps what it was told through a crash (AOF, fsync'd at each write), as production's does. */
  async function durableRedis(name: string): Promise<RedisProcess> {
    const data = join(dir, name);
    await rm(data, { recursive: true, force: true });
    await mkdir(data);
    return RedisProcess.start(undefined, (port) => [
      ...standalone(port),
      '--appendonly',
      'yes',
      '--appendfsync',
      'always',
      '--dir',
      data,
    ]);
  }

  async function gateway(on: RedisProcess, spoolDir: string): Promise<ServiceProcess> {
    const adminPort = await freePort();
    const gw = await ServiceProcess.start(
      'gateway',
      {
        REDIS_URL: on.url,
        PETS_URL: upstreamUrl,
        PLANS_FILE: join(dir, 'plans.json'),
        API_KEYS_FILE: join(dir, 'keys.json'),
        RATE_LIMIT_FAILURE_MODE: 'open',
        REDIS_COMMAND_TIMEOUT_MS: '200',
        USAGE_SPOOL_DIR: spoolDir,
        ADMIN_TOKEN,
        ADMIN_PORT: String(adminPort),
        LOG_LEVEL: 'info',
      },
      { ready: '/readyz' },
    );
    adminPorts.set(gw, adminPort);
    return gw;
  }

  const admin = (gw: ServiceProcess, path: string, body?: object) =>
    adminClient(() => `http://127.0.0.1:${adminPorts.get(gw)}`, ADMIN_TOKEN).call(path, body);
  const topUp = (gw: ServiceProcess, id: string, amount: number) =>
    adminClient(() => `http://127.0.0.1:${adminPorts.get(gw)}`, ADMIN_TOKEN).topUp(id, amount);

  const balance = async (gw: ServiceProcess): Promise<number> =>
    (await admin(gw, `/admin/keys/${PAYING.id}/credits`)).balance as number;

  const totals = async (gw: ServiceProcess) =>
    (await admin(gw, `/admin/keys/${PAYING.id}/usage/history`)).totals as { admitted: number; upstreamFailed: number };

  const get = (gw: ServiceProcess) =>
    fetch(`${gw.url}/v1/pets?limit=1`, {
      headers: { authorization: `Bearer ${PAYING.key}` },
      signal: AbortSignal.timeout(20_000),
    });

  /**
   * SERVED requests served, then UNSERVED admitted (their credits spent) and held by the upstream,
   * which fails them once `away` has taken Redis away. Resolves once the gateway has tried to give
   * their credits back (its log says it did, or that it could not).
   */
  async function unservedWhileAway(gw: ServiceProcess, away: () => Promise<void> | void): Promise<void> {
    await topUp(gw, PAYING.id, BALANCE);
    for (let i = 0; i < SERVED; i++) expect((await get(gw)).status).toBe(200);
    upstream.holding = true;
    const unserved = Array.from({ length: UNSERVED }, () => get(gw));
    await upstream.holds(UNSERVED);
    const from = gw.logs.length;
    await away();
    upstream.fail();
    const answers = await Promise.all(unserved);
    expect(answers.map((r) => r.status)).toEqual(Array(UNSERVED).fill(503));
    await vi.waitFor(
      () =>
        expect(
          gw.messages('refunds of unserved requests wait in the usage spool', from).length +
            gw.messages('a refund of unserved requests was not written', from).length,
        ).toBeGreaterThan(0),
      { timeout: 10_000, interval: 50 },
    );
  }

  it('gives back, once, what a replica that died with Redis down could not give back', async () => {
    redis = await durableRedis('crash');
    const spool = join(dir, 'spool-crash');
    const first = await gateway(redis, spool);
    const down = redis;
    await unservedWhileAway(first, () => down.kill());
    // The replica dies before Redis is back: what it could not write is only in its spool.
    await first.kill();
    await down.restart();
    const successor = await gateway(down, spool);
    await vi.waitFor(async () => expect(await readdir(spool)).toEqual([]), { timeout: 20_000, interval: 200 });
    const seen = { balance: await balance(successor), history: await totals(successor) };
    console.log(`refunds with Redis down and a replica's death: ${JSON.stringify(seen)}`);
    expect(seen.balance).toBe(BALANCE - SERVED);
    expect(seen.history).toMatchObject({ admitted: SERVED, upstreamFailed: UNSERVED });
  }, 90_000);

  it('gives back, once, what failed upstream while Redis was stalled', async () => {
    redis = await durableRedis('stall');
    const stalled = redis;
    const gw = await gateway(stalled, join(dir, 'spool-stall'));
    try {
      await unservedWhileAway(gw, () => stalled.freeze());
    } finally {
      stalled.thaw();
    }
    await vi.waitFor(async () => expect(await readdir(join(dir, 'spool-stall'))).toEqual([]), {
      timeout: 20_000,
      interval: 200,
    });
    const seen = { balance: await balance(gw), history: await totals(gw) };
    console.log(`refunds with Redis stalled: ${JSON.stringify(seen)}`);
    // Neither lost nor given back twice (the write that timed out in the stall and its spooled copy).
    expect(seen.balance).toBe(BALANCE - SERVED);
    expect(seen.history).toMatchObject({ admitted: SERVED, upstreamFailed: UNSERVED });
  }, 90_000);
});
