import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { buildMetricsApp, createRegistry } from '@animal-store/common/metrics.js';
import { buildApp as buildGateway } from '@animal-store/gateway/app.js';
import { loadConfig } from '@animal-store/gateway/config.js';
import { createDeps, type GatewayDeps } from '@animal-store/gateway/deps.js';
import { generateApiKey } from '@animal-store/gateway/keys/api-key.js';
import {
  addKey,
  bearer,
  connected,
  redisClient,
  startGateway,
  type TestGateway,
} from '@animal-store/gateway/test/support/helpers.js';
import { buildApp as buildPets } from '@animal-store/pets/app.js';
import { MemoryPetStore } from '@animal-store/pets/store/memory-pet-store.js';
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type TestRedis } from '../support/redis.js';
import { freePort } from '../support/runtime.js';

/**
 * Operations across both services on real sockets: Prometheus metrics for requests, rate-limit
 * decisions, upstream errors and the pet store; structured logs that carry one request id end to
 * end and the key id, never the key.
 */

type Pets = ReturnType<typeof buildPets>;
type LogLine = Record<string, unknown> & { msg?: string; reqId?: string; keyId?: string; service?: string };

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Prometheus text exposition format, the sample lines only. */
function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/.exec(line);
    if (!match) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[key as string] = (value as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    samples.push({ name: match[1] as string, labels, value: Number(match[3]) });
  }
  return samples;
}

/** Sum of the samples of one series name whose labels include `labels`. */
function total(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** GET /metrics from the service's metrics listener (its own app, as server.ts builds it). */
async function scrape(registry: Registry): Promise<Sample[]> {
  const app = await buildMetricsApp(registry, { serviceName: 'test', logLevel: 'silent' });
  try {
    const res = await app.inject({ url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    return parseMetrics(res.body);
  } finally {
    await app.close();
  }
}

function capture(): { lines: string[]; stream: { write(line: string): void }; parsed(): LogLine[] } {
  const lines: string[] = [];
  return {
    lines,
    stream: { write: (chunk: string) => lines.push(...chunk.split('\n').filter(Boolean)) },
    parsed: () => lines.map((l) => JSON.parse(l) as LogLine),
  };
}

let redis: TestRedis;
let pets: Pets;
let petsUrl: string;
const petsRegistry = createRegistry('pets', false);
const petsLogs = capture();
const gatewayLogs = capture();
let gateway: { app: FastifyInstance; deps: GatewayDeps; url: string; close(): Promise<void> };
const others: TestGateway[] = [];

/** The gateway as server.ts builds it, on the shared Redis, logging at info into `gatewayLogs`. */
async function loggingGateway(env: Record<string, string>): Promise<typeof gateway> {
  const config = loadConfig({
    LOG_LEVEL: 'info',
    PETS_URL: petsUrl,
    REDIS_URL: redis.url,
    REDIS_PREFIX: `ops${randomUUID().slice(0, 8)}:`,
    UPSTREAM_TIMEOUT_MS: '2000',
    ...env,
  });
  const client = await connected(redisClient(redis.url, config.redisCommandTimeoutMs));
  const deps = await createDeps(
    config,
    { redis: client, subscriber: null },
    { defaultMetrics: false, logStream: gatewayLogs.stream },
  );
  const app = await buildGateway(config, deps);
  await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    app,
    deps,
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    async close() {
      await app.close();
      client.disconnect();
    },
  };
}

beforeAll(async () => {
  redis = await startRedis();
  pets = buildPets(
    { logLevel: 'info' },
    { store: new MemoryPetStore(), registry: petsRegistry, logStream: petsLogs.stream },
  );
  await pets.listen({ host: '127.0.0.1', port: 0 });
  petsUrl = `http://127.0.0.1:${(pets.server.address() as AddressInfo).port}`;
  gateway = await loggingGateway({ BAN_THRESHOLD: '2', BAN_GRACE_MS: '0', ANON_PER_MINUTE: '1000' });
});

afterAll(async () => {
  for (const g of others) await g.close();
  await gateway?.close();
  await pets?.close();
  await redis?.stop();
});

describe('metrics', () => {
  it('both services count requests and time them by route, method and status', async () => {
    const { key } = await addKey(gateway.deps, 'pro');
    const auth = bearer(key);
    expect((await fetch(`${gateway.url}/v1/pets`, { headers: auth })).status).toBe(200);
    const created = await fetch(`${gateway.url}/v1/pets`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Rex', categoryId: 1 }),
    });
    expect(created.status).toBe(201);
    expect((await fetch(`${gateway.url}/v1/pets/999999`, { headers: auth })).status).toBe(404);
    expect((await fetch(`${gateway.url}/v1/pets`)).status).toBe(401);

    const gw = await scrape(gateway.deps.registry);
    // By route template: the deprecated /v1/pets/:petId is told apart from the list.
    const proxied = { route: '/v1/pets', method: 'GET', status: '200' };
    expect(total(gw, 'http_requests_total', proxied)).toBeGreaterThanOrEqual(1);
    expect(total(gw, 'http_requests_total', { route: '/v1/pets', method: 'POST', status: '201' })).toBe(1);
    expect(total(gw, 'http_requests_total', { route: '/v1/pets/:petId', method: 'GET', status: '404' })).toBe(1);
    expect(
      total(gw, 'http_requests_total', { route: '/v1/pets', method: 'GET', status: '401' }),
    ).toBeGreaterThanOrEqual(1);
    expect(gw.some((s) => s.labels.route === '/v1/*')).toBe(false);
    // The histogram: one count per request, cumulative buckets ending in +Inf, a positive sum.
    expect(total(gw, 'http_request_duration_seconds_count', proxied)).toBe(total(gw, 'http_requests_total', proxied));
    const buckets = gw.filter(
      (s) =>
        s.name === 'http_request_duration_seconds_bucket' &&
        s.labels.route === proxied.route &&
        s.labels.method === 'GET' &&
        s.labels.status === '200',
    );
    expect(buckets.at(-1)?.labels.le).toBe('+Inf');
    expect(buckets.map((b) => b.value)).toEqual([...buckets.map((b) => b.value)].sort((a, b) => a - b));
    expect(total(gw, 'http_request_duration_seconds_sum', proxied)).toBeGreaterThan(0);
    for (const s of gw.filter((x) => x.name === 'http_requests_total')) {
      expect(Object.keys(s.labels)).toEqual(expect.arrayContaining(['route', 'method', 'status', 'service']));
      expect(s.labels.service).toBe('gateway');
    }

    const pm = await scrape(petsRegistry);
    expect(
      total(pm, 'http_requests_total', { route: '/v1/pets', method: 'GET', status: '200' }),
    ).toBeGreaterThanOrEqual(1);
    expect(total(pm, 'http_requests_total', { route: '/v1/pets', method: 'POST', status: '201' })).toBe(1);
    expect(total(pm, 'http_requests_total', { route: '/v1/pets/:petId', method: 'GET', status: '404' })).toBe(1);
    expect(total(pm, 'http_request_duration_seconds_count', { route: '/v1/pets', method: 'POST', status: '201' })).toBe(
      1,
    );
    // The 401 never reached pets.
    expect(total(pm, 'http_requests_total', { status: '401' })).toBe(0);
  });

  it('the pets service times its store by operation and outcome', async () => {
    const pm = await scrape(petsRegistry);
    for (const operation of ['create', 'list', 'get']) {
      expect(
        total(pm, 'pets_store_operation_duration_seconds_count', { operation, outcome: 'ok' }),
        operation,
      ).toBeGreaterThanOrEqual(1);
      expect(
        pm.some(
          (s) =>
            s.name === 'pets_store_operation_duration_seconds_bucket' &&
            s.labels.operation === operation &&
            s.labels.le === '+Inf',
        ),
      ).toBe(true);
    }
  });

  it('the gateway counts rate-limit decisions: admitted, limited, banned (shared, then local)', async () => {
    const { key } = await addKey(gateway.deps, 'enterprise', { perMinute: 2, perDay: 1000 });
    const before = await scrape(gateway.deps.registry);
    const statuses: number[] = [];
    const codes: string[] = [];
    for (let i = 0; i < 7; i++) {
      const res = await fetch(`${gateway.url}/v1/pets`, { headers: bearer(key) });
      statuses.push(res.status);
      codes.push(res.status === 200 ? 'ok' : ((await res.json()) as { code: string }).code);
    }
    // 2 admitted; refusals 1 and 2 are within BAN_THRESHOLD=2; the 3rd refusal bans the key.
    expect(statuses).toEqual([200, 200, 429, 429, 429, 429, 429]);
    expect(codes.slice(0, 4)).toEqual(['ok', 'ok', 'rate_limit_exceeded', 'rate_limit_exceeded']);
    expect(codes.slice(4)).toEqual(['api_key_banned', 'api_key_banned', 'api_key_banned']);

    const after = await scrape(gateway.deps.registry);
    const delta = (labels: Record<string, string>) =>
      total(after, 'gateway_rate_limit_decisions_total', labels) -
      total(before, 'gateway_rate_limit_decisions_total', labels);
    expect(delta({ decision: 'admitted', source: 'shared' })).toBe(2);
    expect(delta({ decision: 'limited', source: 'shared' })).toBe(2);
    expect(delta({ decision: 'banned' })).toBe(3);
    // Once this replica has seen the ban, it answers without Redis.
    expect(delta({ decision: 'banned', source: 'local-ban' })).toBeGreaterThanOrEqual(1);
    expect(total(after, 'gateway_anonymous_requests_total', { reason: 'missing' })).toBeGreaterThanOrEqual(1);
  });

  it('with Redis gone (open mode) decisions are counted as taken by the fallback, and Redis errors are counted', async () => {
    const g = await startGateway({ redisUrl: redis.url, upstream: petsUrl });
    others.push(g);
    await g.listen();
    const { key } = await addKey(g.deps, 'pro');
    expect((await fetch(`${g.url}/v1/pets`, { headers: bearer(key) })).status).toBe(200);
    // The gateway's own connections drop (the limit script's too); the shared Redis stays up for everyone else.
    g.redis?.disconnect();
    g.limiterRedis?.disconnect();
    const res = await fetch(`${g.url}/v1/pets`, { headers: bearer(key) });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ratelimit-limit')).toBe('300');

    const m = await scrape(g.deps.registry);
    expect(total(m, 'gateway_rate_limit_decisions_total', { decision: 'admitted', source: 'shared' })).toBe(1);
    expect(total(m, 'gateway_rate_limit_decisions_total', { decision: 'admitted', source: 'fallback' })).toBe(1);
    expect(total(m, 'gateway_redis_errors_total')).toBeGreaterThanOrEqual(1);
  });

  it('upstream errors are counted by kind, and the client gets the Error shape without the upstream’s address', async () => {
    const closedPort = await freePort();
    const g = await startGateway({ redisUrl: redis.url, upstream: `http://127.0.0.1:${closedPort}` });
    others.push(g);
    await g.listen();
    const { key } = await addKey(g.deps, 'pro');
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${g.url}/v1/pets`, { headers: bearer(key) });
      const text = await res.text();
      expect(res.status).toBe(503);
      expect(JSON.parse(text)).toEqual({ code: 'upstream_unavailable', message: expect.any(String), status: 503 });
      expect(text).not.toContain(String(closedPort));
      expect(text).not.toContain('ECONNREFUSED');
    }
    const m = await scrape(g.deps.registry);
    expect(total(m, 'gateway_upstream_errors_total', { kind: 'refused' })).toBe(2);
    expect(total(m, 'http_requests_total', { route: '/v1/pets', status: '503' })).toBe(2);
  });
});

describe('structured logs', () => {
  const forRequest = (logs: LogLine[], id: string) => logs.filter((l) => l.reqId === id);

  it('one request id flows from the gateway to pets: both log it, the client gets it back', async () => {
    const { id: keyId, key } = await addKey(gateway.deps, 'pro');
    const given = `trace-${randomUUID()}`;
    const res = await fetch(`${gateway.url}/v1/pets?limit=5`, { headers: { ...bearer(key), 'x-request-id': given } });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBe(given);

    // And an id the gateway makes up itself when the client sends none.
    const made = await fetch(`${gateway.url}/v1/pets`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Logged', categoryId: 2 }),
    });
    expect(made.status).toBe(201);
    const madeId = made.headers.get('x-request-id') as string;
    expect(madeId).toMatch(/^[0-9a-f-]{36}$/);

    for (const id of [given, madeId]) {
      const gw = forRequest(gatewayLogs.parsed(), id);
      const pt = forRequest(petsLogs.parsed(), id);
      // One access line per service, nothing else at info.
      expect(gw.map((l) => l.msg)).toEqual(['request']);
      expect(pt.map((l) => l.msg)).toEqual(['request']);
      expect(new Set(gw.map((l) => l.service))).toEqual(new Set(['gateway']));
      expect(new Set(pt.map((l) => l.service))).toEqual(new Set(['pets']));
      // Both name the caller's key and the same W3C trace.
      expect(gw[0]?.keyId).toBe(keyId);
      expect(pt[0]?.keyId).toBe(keyId);
      expect(gw[0]?.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(pt[0]?.traceId).toBe(gw[0]?.traceId);
      expect(gw[0]?.path).toBe(pt[0]?.path);
    }
  });

  it('a caller’s unsafe request id is replaced, not logged or echoed', async () => {
    const { key } = await addKey(gateway.deps, 'pro');
    const unsafe = 'x"}\n{"injected":true';
    const res = await fetch(`${gateway.url}/v1/pets`, {
      headers: { ...bearer(key), 'x-request-id': encodeURIComponent(unsafe) },
    });
    expect(res.status).toBe(200);
    const id = res.headers.get('x-request-id') as string;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(forRequest(petsLogs.parsed(), id).length).toBeGreaterThan(0);
    expect(gatewayLogs.lines.join('\n')).not.toContain('injected');
  });

  it('the key never appears in either service’s logs, after 200s, 401s and 429s; its id does', async () => {
    const { id: keyId, key } = await addKey(gateway.deps, 'enterprise', { perMinute: 1, perDay: 100 });
    const ids: string[] = [];
    const send = async (authorization: string) => {
      const res = await fetch(`${gateway.url}/v1/pets`, { headers: { authorization } });
      ids.push(res.headers.get('x-request-id') as string);
      return res.status;
    };
    expect(await send(`Bearer ${key}`)).toBe(200);
    expect(await send(`Bearer ${key}`)).toBe(429);
    expect(await send(`Bearer ${key}`)).toBe(429);
    expect(await send(`Bearer ${key}`)).toBe(429); // banned (BAN_THRESHOLD=2)

    // Secret-looking but refused: a tampered checksum, a well-formed unknown key, and junk.
    const tampered = `${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}`;
    const unknown = generateApiKey();
    const junk = `ask_${'S3cr3t'.repeat(8)}`;
    expect(await send(`Bearer ${tampered}`)).toBe(401);
    expect(await send(`Bearer ${unknown}`)).toBe(401);
    expect(await send(`Bearer ${junk}`)).toBe(401);
    expect(await send(`Token ${key}`)).toBe(401);

    const everything = `${gatewayLogs.lines.join('\n')}\n${petsLogs.lines.join('\n')}`;
    for (const secret of [key, tampered, unknown, junk]) {
      expect(everything).not.toContain(secret);
      // Nor the random part alone (40 characters after ask_), e.g. in a truncated or re-encoded form.
      expect(everything).not.toContain(secret.slice(4, 44));
    }
    // "Bearer <API_KEY>" is the hint in missing_api_key refusals; nothing else follows the scheme.
    expect(everything).not.toMatch(/Bearer (?!<API_KEY>)/i);

    const gw = gatewayLogs.parsed();
    for (const id of ids.slice(0, 4)) {
      const lines = forRequest(gw, id);
      expect(
        lines.some((l) => l.keyId === keyId),
        `no keyId for ${id}`,
      ).toBe(true);
    }
    // The refusals' access lines say what the limiter decided, under the key id for the keyed ones.
    const refused = forRequest(gw, ids[3] as string).find((l) => l.msg === 'request');
    expect(refused).toMatchObject({ keyId, status: 429, limiter: 'banned' });
    const unknownRefused = forRequest(gw, ids[5] as string).find((l) => l.msg === 'request');
    expect(unknownRefused).toMatchObject({ status: 401, limiterSource: 'address' });
    expect(unknownRefused?.keyId).toBeUndefined();
  });

  it('every captured line is one JSON object with a level, a time and the service name', () => {
    for (const logs of [gatewayLogs, petsLogs]) {
      expect(logs.lines.length).toBeGreaterThan(0);
      for (const line of logs.parsed()) {
        expect(typeof line.level).toBe('number');
        expect(typeof line.time).toBe('number');
        expect(['gateway', 'pets']).toContain(line.service);
      }
    }
  });
});
