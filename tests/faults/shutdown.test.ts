import { mkdtemp, rm } from 'node:fs/promises';
import { Agent, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRegistry } from '@animal-store/common/metrics.js';
import { buildApp as buildPets } from '@animal-store/pets/app.js';
import { MemoryPetStore } from '@animal-store/pets/store/memory-pet-store.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Outcome, type RequestLoops, startLoops, tally } from '../support/request-loop.js';
import { freePort } from '../support/runtime.js';
import { createKeyInFile, killAllServices, ServiceProcess } from '../support/service-process.js';

/**
 * SIGTERM under load: the process stops taking work, finishes what it accepted, refuses the rest
 * cleanly (a 503 with Connection: close, or a refused/reset connection; never a hang), and exits
 * 0 before its grace period. Through the gateway, no POST the client saw accepted is lost, and
 * nothing was created that the client was not told about.
 */

const GRACE_MS = 5_000;
const LOOPS = 8;
/** Transport-level outcomes that mean "the server never took this request": a clean refusal. */
const REFUSED_AT_TCP = new Set(['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'EPIPE']);

interface SlowPost {
  /** Sends the rest of the body; resolves with the status and body. */
  finish(): Promise<{ status: number; body: string }>;
}

/**
 * A POST on its own keep-alive connection that sends half its body and waits: a request that is
 * in flight (headers in, body pending) for as long as the test wants. Once answered, its
 * connection stays open and idle, as a pooling client or load balancer leaves it: the server
 * must close it itself to finish shutting down.
 */
function slowPost(url: string, headers: Record<string, string>, body: string): SlowPost {
  const target = new URL(url);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const req = httpRequest({
    host: target.hostname,
    port: target.port,
    path: target.pathname,
    method: 'POST',
    agent,
    headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
  });
  const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, body: text });
        // Pooled, not closed: the socket goes back to the agent, which keeps it until the server ends it.
        setTimeout(() => agent.destroy(), 2 * GRACE_MS).unref();
      });
      res.on('error', reject);
    });
    req.on('error', reject);
  });
  const half = Math.floor(body.length / 2);
  req.write(body.slice(0, half));
  req.flushHeaders();
  return {
    finish() {
      req.end(body.slice(half));
      return response;
    },
  };
}

function isDrainingRefusal(o: Outcome): boolean {
  if (o.status !== 503 || o.error !== undefined) return false;
  const body = JSON.parse(o.body ?? '{}') as { code?: string; status?: number };
  return body.code === 'upstream_unavailable' && body.status === 503 && o.headers?.connection === 'close';
}

/** Where the log shows the process began to shut down (close-with-grace's handler ran). */
async function shuttingDown(service: ServiceProcess): Promise<void> {
  await vi.waitFor(() => expect(service.messages('shutting down')).not.toHaveLength(0), { timeout: GRACE_MS });
}

/**
 * SIGTERM while `loops` and the half-sent `slow` POST are in flight, then what every shutdown
 * must show: exit 0 before the grace period, the half-sent POST served (201), no request left
 * hanging, and every outcome either answered with `okStatus`, refused as the server drains, or
 * refused at the TCP level.
 */
async function terminateUnderLoad(service: ServiceProcess, slow: SlowPost, loops: RequestLoops, okStatus: number) {
  const signalledAt = Date.now();
  service.signal('SIGTERM');
  await shuttingDown(service);
  const slowResult = await slow.finish();
  const exit = await service.exited;
  const outcomes = await loops.stop();

  expect(exit.code, service.output().slice(-2_000)).toBe(0);
  expect(exit.at - signalledAt).toBeLessThan(GRACE_MS);
  expect(slowResult.status, slowResult.body).toBe(201);

  const summary = JSON.stringify(tally(outcomes));
  expect(
    outcomes.filter((o) => o.error === 'TIMEOUT'),
    summary,
  ).toEqual([]);
  const ok = outcomes.filter((o) => o.status === okStatus && o.error === undefined);
  const draining = outcomes.filter(isDrainingRefusal);
  const atTcp = outcomes.filter((o) => o.status === undefined && REFUSED_AT_TCP.has(o.error ?? ''));
  expect(ok.length + draining.length + atTcp.length, summary).toBe(outcomes.length);
  return { slowResult, ok, draining, atTcp };
}

afterEach(async () => {
  await killAllServices();
});

describe('gateway SIGTERM under POST load, pets staying up', () => {
  let dir: string;
  let keysFile: string;
  let key: string;
  let pets: ReturnType<typeof buildPets>;
  let petsUrl: string;
  /** Request ids pets received, and the status it answered each with. */
  const received = new Set<string>();
  const answered = new Map<string, number>();

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'faults-shutdown-'));
    keysFile = join(dir, 'keys.json');
    ({ key } = await createKeyInFile(keysFile));
    pets = buildPets({ logLevel: 'silent' }, { store: new MemoryPetStore(), registry: createRegistry('pets', false) });
    pets.addHook('onRequest', (request, _reply, done) => {
      received.add(request.id);
      done();
    });
    pets.addHook('onResponse', (request, reply, done) => {
      answered.set(request.id, reply.statusCode);
      done();
    });
    await pets.listen({ host: '127.0.0.1', port: 0 });
    petsUrl = `http://127.0.0.1:${(pets.server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await pets?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function allPets(): Promise<Array<{ id: number; name: string }>> {
    const out: Array<{ id: number; name: string }> = [];
    for (let after = 0; ; ) {
      const res = await fetch(`${petsUrl}/v1/pets?limit=100&after=${after}`);
      expect(res.status).toBe(200);
      const page = (await res.json()) as Array<{ id: number; name: string }>;
      out.push(...page);
      const last = page.at(-1);
      if (!last || page.length < 100) return out;
      after = last.id;
    }
  }

  it('finishes in-flight POSTs, refuses the rest cleanly, exits 0 before the grace period, and loses no accepted pet', async () => {
    const gateway = await ServiceProcess.start('gateway', {
      PETS_URL: petsUrl,
      API_KEYS_FILE: keysFile,
      SHUTDOWN_GRACE_MS: String(GRACE_MS),
      LOG_LEVEL: 'info',
      // Two listeners, as in production: both must close within the grace period.
      ADMIN_TOKEN: 'faults-admin-token-0123456789',
      ADMIN_PORT: String(await freePort()),
      PORTAL_PORT: '0',
    });
    const auth = { authorization: `Bearer ${key}` };
    // The tag is both the request id (the gateway passes it on to pets) and the pet's name.
    const loops = startLoops({
      concurrency: LOOPS,
      timeoutMs: GRACE_MS * 2,
      request: (_loop, _seq, tag) => ({
        url: `${gateway.url}/v1/pets`,
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', 'x-request-id': `gw-${tag}` },
        body: JSON.stringify({ name: `gw-${tag}`, categoryId: 1 }),
      }),
      // Once the gateway is gone, a new connection is refused: that loop is done.
      until: (o) => o.error === 'ECONNREFUSED',
    });
    await vi.waitFor(() => expect(loops.outcomes.filter((o) => o.status === 201).length).toBeGreaterThanOrEqual(200), {
      timeout: 10_000,
    });

    // A POST whose body is still arriving when the signal comes: it must still be served.
    const slow = slowPost(
      `${gateway.url}/v1/pets`,
      { ...auth, 'x-request-id': 'gw-slow' },
      '{"name":"gw-slow","categoryId":2}',
    );
    await vi.waitFor(() => expect(received.has('gw-slow')).toBe(true));

    const { slowResult, ok: created, draining, atTcp } = await terminateUnderLoad(gateway, slow, loops, 201);

    // Refused requests never reached pets: refused means nothing happened.
    for (const o of [...draining, ...atTcp]) expect(received.has(`gw-${o.tag}`), o.tag).toBe(false);

    // Nothing lost, nothing extra: pets holds exactly the pets the client was told were created.
    const stored = await allPets();
    const byName = new Map(stored.map((p) => [p.name, p]));
    expect(byName.size, 'no pet created twice').toBe(stored.length);
    for (const o of created) {
      const pet = JSON.parse(o.body ?? '') as { id: number; name: string };
      expect(byName.get(`gw-${o.tag}`)?.id, o.tag).toBe(pet.id);
    }
    const slowPet = JSON.parse(slowResult.body) as { id: number };
    expect(byName.get('gw-slow')?.id).toBe(slowPet.id);
    const told = new Set([...created.map((o) => `gw-${o.tag}`), 'gw-slow']);
    expect(stored.filter((p) => !told.has(p.name)).map((p) => p.name)).toEqual([]);
    expect(stored.length).toBe(created.length + 1);
    // And pets answered everything the gateway forwarded.
    expect([...received].filter((id) => answered.get(id) === undefined)).toEqual([]);
  });
});

describe('pets SIGTERM under GET load', () => {
  it('answers every request it took, refuses the rest cleanly, and exits 0 before the grace period', async () => {
    // debug: pets then logs each request as it arrives ("request received") besides its access line.
    const pets = await ServiceProcess.start('pets', { SHUTDOWN_GRACE_MS: String(GRACE_MS), LOG_LEVEL: 'debug' });
    for (const name of ['Rex', 'Tom', 'Kitty']) {
      const res = await fetch(`${pets.url}/v1/pets`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name, categoryId: 1 }),
      });
      expect(res.status).toBe(201);
    }
    const loops = startLoops({
      concurrency: LOOPS,
      timeoutMs: GRACE_MS * 2,
      request: (_loop, _seq, tag) => ({ url: `${pets.url}/v1/pets`, headers: { 'x-request-id': `pg-${tag}` } }),
      until: (o) => o.error === 'ECONNREFUSED',
    });
    await vi.waitFor(() => expect(loops.outcomes.length).toBeGreaterThanOrEqual(300), { timeout: 10_000 });

    const slow = slowPost(`${pets.url}/v1/pets`, { 'x-request-id': 'pg-slow' }, '{"name":"Slow","categoryId":2}');
    await vi.waitFor(() =>
      expect(pets.logs.some((l) => l.json?.reqId === 'pg-slow' && l.json?.msg === 'request received')).toBe(true),
    );

    const { ok: served, atTcp } = await terminateUnderLoad(pets, slow, loops, 200);
    for (const o of served) expect((JSON.parse(o.body ?? '') as unknown[]).length).toBe(3);

    // The server's own account (its log): every request it started, it completed (its access
    // line, written asynchronously and flushed before exit), and none of the requests the client
    // saw refused at the TCP level had reached it.
    const started = new Set(
      pets.logs.filter((l) => l.json?.msg === 'request received').map((l) => String(l.json?.reqId)),
    );
    const completed = new Set(pets.logs.filter((l) => l.json?.msg === 'request').map((l) => String(l.json?.reqId)));
    expect(started.size).toBeGreaterThanOrEqual(served.length);
    expect([...started].filter((id) => !completed.has(id))).toEqual([]);
    for (const o of atTcp) expect(started.has(`pg-${o.tag}`), o.tag).toBe(false);
  });
});

describe('access lines at SIGTERM', () => {
  // Log lines are written asynchronously: the ones still buffered when the signal comes must be
  // written before the process exits, not lost with it.
  const services: { name: 'gateway' | 'pets'; env: Record<string, string>; status: number }[] = [
    { name: 'gateway', env: { ANON_PER_MINUTE: '1000000', PETS_URL: 'http://127.0.0.1:9' }, status: 401 },
    { name: 'pets', env: {}, status: 200 },
  ];
  it.each(services)(
    '$name: every answered request has its access line after SIGTERM',
    async ({ name, env, status }) => {
      const service = await ServiceProcess.start(name, {
        ...env,
        LOG_LEVEL: 'info',
        SHUTDOWN_GRACE_MS: String(GRACE_MS),
      });
      const ids: string[] = [];
      await Promise.all(
        Array.from({ length: 8 }, async (_, loop) => {
          for (let i = 0; i < 50; i++) {
            const id = `flush-${loop}-${i}`;
            const res = await fetch(`${service.url}/v1/pets?limit=${i + 1}`, { headers: { 'x-request-id': id } });
            await res.arrayBuffer();
            expect(res.status).toBe(status);
            ids.push(id);
          }
        }),
      );
      // At once after the last answer: lines may still be in the asynchronous destination.
      service.signal('SIGTERM');
      const exit = await service.exited;
      expect(exit.code).toBe(0);
      // The pipes may deliver the last lines after 'exit'.
      await vi.waitFor(() => expect(service.messages('shutting down')).toHaveLength(1));
      const access = service.logs.filter((l) => l.json?.msg === 'request' && String(l.json.reqId).startsWith('flush-'));
      expect(access.map((l) => String(l.json?.reqId)).sort()).toEqual([...ids].sort());
      for (const line of access) expect(line.json).toMatchObject({ path: '/v1/pets', status, method: 'GET' });
      // In the order they were logged: every one of them before the shutdown began.
      const shutdownAt = service.logs.findIndex((l) => l.json?.msg === 'shutting down');
      expect(service.logs.indexOf(access.at(-1) as (typeof access)[number])).toBeLessThan(shutdownAt);
      expect(service.output()).not.toContain('limit=');
    },
  );
});
