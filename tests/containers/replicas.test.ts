import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Outcome, startLoops, tally } from '../support/request-loop.js';
import { createKeyInFile } from '../support/service-process.js';
import { type Stack, startStack } from '../support/stack.js';

/**
 * Gateway replicas as containers of the gateway image, on one Redis, in front of the pets
 * container, under load:
 * - one replica killed (SIGKILL, no grace) mid-load and replaced by a new container: the shared
 *   quota gives no slot twice (no two admitted requests see the same X-RateLimit-Remaining, and
 *   no more than the limit are admitted), the new container does not start the quota afresh,
 *   and every pet a client was told was created (201) is there afterwards;
 * - a rolling restart: each replica in turn leaves the balancer, stops on SIGTERM (finishing
 *   what it took) and is replaced by a new, ready container that joins the balancer; not one
 *   request fails.
 */

const GATEWAY_ENV = { RATE_LIMIT_FAILURE_MODE: 'closed', REDIS_COMMAND_TIMEOUT_MS: '2000' };
/**
 * The quota test's limit, per minute and per day: the keys CLI refuses a minute limit above the
 * day's. The day's window binds (it never has more left than the minute's, and on a tie the
 * headers name the window that resets later), and it does not turn over during the test.
 */
const QUOTA = 60;

let stack: Stack;
let workDir: string;
let keysFile: string;
let quotaKey: string;
let bulkKey: string;

beforeAll(async () => {
  workDir = await mkdtemp(join(tmpdir(), 'containers-replicas-'));
  keysFile = join(workDir, 'api-keys.json');
  // In API_KEYS_FILE, which every replica reads at start: the in-memory key store is per replica.
  quotaKey = (await createKeyInFile(keysFile, 'enterprise', { perMinute: QUOTA, perDay: QUOTA })).key;
  bulkKey = (await createKeyInFile(keysFile)).key;
  stack = await startStack({ apiKeysFile: keysFile, gatewayEnv: GATEWAY_ENV, readyTimeoutMs: 120_000 });
  expect(stack.mode).toBe('containers');
});

afterAll(async () => {
  await stack?.stop();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

const startReplica = () => stack.startGatewayReplica({ apiKeysFile: keysFile, env: GATEWAY_ENV });

describe('gateway replicas as containers on one Redis', () => {
  it('a replica killed under load and started again admits nothing twice and loses no created pet', async () => {
    let second = await startReplica();
    const bases = [stack.gatewayUrl, second.url];
    const loops = startLoops({
      concurrency: 4,
      timeoutMs: 15_000,
      request: (loop, seq, tag) => ({
        url: `${bases[loop % 2]}/v1/pets`,
        method: 'POST',
        headers: { authorization: `Bearer ${quotaKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `${tag}-${loop}-${seq}`, categoryId: 1 }),
      }),
    });
    let outcomes: Outcome[] = [];
    try {
      await vi.waitFor(() => expect(loops.outcomes.filter((o) => o.status === 201).length).toBeGreaterThan(15), {
        timeout: 60_000,
        interval: 50,
      });
      await second.kill?.();
      // The balancer's part: while it is away, its share goes to the other replica.
      bases[1] = stack.gatewayUrl;
      second = await startReplica();
      bases[1] = second.url;
      const back = Date.now();
      await vi.waitFor(
        () => expect(loops.since(back).filter((o) => o.status !== undefined).length).toBeGreaterThan(20),
        { timeout: 60_000, interval: 50 },
      );
    } finally {
      outcomes = await loops.stop();
    }

    const created = outcomes.filter((o) => o.status === 201);
    const counts = tally(outcomes);
    expect(created.length, JSON.stringify(counts)).toBeGreaterThan(15);
    expect(created.length, JSON.stringify(counts)).toBeLessThanOrEqual(QUOTA);
    const remaining = created.map((o) => o.headers?.['x-ratelimit-remaining']);
    expect(new Set(remaining).size, 'one quota slot per admitted request').toBe(created.length);
    // Past the quota, refusals: never a 5xx.
    for (const o of outcomes) if (o.status !== undefined) expect([201, 429]).toContain(o.status);
    // Both replicas, the new one too, count on the same exhausted quota.
    for (const base of [stack.gatewayUrl, second.url]) {
      const res = await fetch(`${base}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${quotaKey}` } });
      expect(res.status).toBe(429);
    }

    const ids = created.map((o) => (JSON.parse(o.body ?? '{}') as { id: number }).id);
    const found = await fetch(`${stack.gatewayUrl}/v1/pets?id=${ids.join(',')}&limit=100`, {
      headers: { authorization: `Bearer ${bulkKey}` },
    });
    expect(found.status).toBe(200);
    const pets = (await found.json()) as Array<{ id: number }>;
    expect(pets.map((p) => p.id).sort((a, b) => a - b)).toEqual([...ids].sort((a, b) => a - b));
    await second.stop();
  });

  it('a rolling restart of the gateway fails no request', async () => {
    const pool = [await startReplica(), await startReplica()];
    const balancer = await startBalancer(() => pool.map((r) => r.url));
    const loops = startLoops({
      concurrency: 3,
      timeoutMs: 15_000,
      request: () => ({ url: `${balancer.url}/v1/pets?limit=1`, headers: { authorization: `Bearer ${bulkKey}` } }),
    });
    let outcomes: Outcome[] = [];
    try {
      for (let i = 0; i < pool.length; i++) {
        const old = pool[i];
        if (!old) continue;
        pool.splice(i, 1);
        await old.stop();
        pool.splice(i, 0, await startReplica());
      }
      const done = Date.now();
      await vi.waitFor(() => expect(loops.since(done).length).toBeGreaterThan(10), { timeout: 30_000, interval: 50 });
    } finally {
      outcomes = await loops.stop();
      await balancer.close();
      await Promise.all(pool.map((r) => r.stop()));
    }
    expect(outcomes.length).toBeGreaterThan(20);
    // A failure says which answers came back, and from when, to tell the gateway's from the balancer's.
    const failed = outcomes
      .filter((o) => o.status !== 200)
      .map((o) => `${o.start} ${o.status ?? o.error} ${o.body ?? ''}`);
    expect(tally(outcomes), failed.slice(0, 5).join('\n')).toEqual({ '200': outcomes.length });
  });
});

/**
 * The load balancer's part of a rolling restart, on loopback: each request goes to the next
 * replica of those in the pool when it arrives.
 */
async function startBalancer(pool: () => string[]): Promise<{ url: string; close(): Promise<void> }> {
  let next = 0;
  const server: Server = createServer((req, res) => {
    const targets = pool();
    const target = targets[next++ % targets.length];
    fetch(`${target}${req.url}`, { method: req.method, headers: { authorization: req.headers.authorization ?? '' } })
      .then(async (upstream) => {
        const body = Buffer.from(await upstream.arrayBuffer());
        res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'text/plain' });
        res.end(body);
      })
      .catch((err: unknown) => {
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(String(err));
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
