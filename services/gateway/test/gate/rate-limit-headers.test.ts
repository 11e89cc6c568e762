import Fastify, { type FastifyReply } from 'fastify';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keylessCharge } from '../../src/gate/keyless.js';
import {
  setBannedHeaders,
  setExhaustedAnonymousHeaders,
  setRateLimitHeaders,
} from '../../src/gate/rate-limit-headers.js';
import { AnonymousLimiter } from '../../src/limits/anonymous-limiter.js';
import type { WindowState } from '../../src/limits/key-limiter.js';
import { createGatewayMetrics } from '../../src/observability/metrics.js';

// The rate-limit fields a client reads on every answer, as the gate and the keyless path set them
// from a decision: X-RateLimit-* for the window to watch, the IETF RateLimit / RateLimit-Policy
// for every window. Each case is a decision in, the headers a client receives out (a real Fastify
// reply through app.inject), so the gateway suites need not walk each header through a key.

/** 2026-11-26 12:00:00.000 UTC, in epoch ms: a whole second. */
const NOW = Date.UTC(2026, 10, 26, 12, 0, 0);

const w = (
  name: WindowState['name'],
  limit: number,
  remaining: number,
  resetIn: number,
  windowSeconds = 60,
  scope: WindowState['scope'] = 'key',
): WindowState => ({
  name,
  scope,
  limit,
  remaining,
  windowSeconds,
  resetAt: NOW + resetIn,
});

const RATE_LIMIT_HEADERS = [
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'ratelimit',
  'ratelimit-policy',
];

/** The rate-limit headers a reply carries once `set` has run on it. */
async function headersOf(set: (reply: FastifyReply) => void): Promise<Record<string, string>> {
  const app = Fastify();
  app.get('/', async (_request, reply) => {
    set(reply);
    return 'ok';
  });
  const res = await app.inject({ method: 'GET', url: '/' });
  await app.close();
  const out: Record<string, string> = {};
  for (const name of RATE_LIMIT_HEADERS) {
    const value = res.headers[name];
    if (value !== undefined) out[name] = String(value);
  }
  return out;
}

describe('the rate-limit headers of a decision', () => {
  it.each<[string, WindowState[], Record<string, string>]>([
    [
      'one window: its limit, what remains, its reset in epoch seconds and in seconds from now',
      [w('minute', 60, 59, 60_000)],
      {
        'x-ratelimit-limit': '60',
        'x-ratelimit-remaining': '59',
        'x-ratelimit-reset': String(NOW / 1000 + 60),
        ratelimit: '"minute";r=59;t=60',
        'ratelimit-policy': '"minute";q=60;w=60',
      },
    ],
    [
      'two windows: X-RateLimit-* follow the one with fewest left, the IETF fields list both in order',
      [w('minute', 60, 50, 30_000), w('day', 1_000, 3, 3_600_000, 86_400)],
      {
        'x-ratelimit-limit': '1000',
        'x-ratelimit-remaining': '3',
        'x-ratelimit-reset': String(NOW / 1000 + 3_600),
        ratelimit: '"minute";r=50;t=30, "day";r=3;t=3600',
        'ratelimit-policy': '"minute";q=60;w=60, "day";q=1000;w=86400',
      },
    ],
    [
      'the first window binding when it has fewer left than a later one',
      [w('second', 5, 0, 400, 1), w('hour', 500, 100, 1_000_000, 3_600)],
      {
        'x-ratelimit-limit': '5',
        'x-ratelimit-remaining': '0',
        'x-ratelimit-reset': String(NOW / 1000 + 1),
        ratelimit: '"second";r=0;t=1, "hour";r=100;t=1000',
        'ratelimit-policy': '"second";q=5;w=1, "hour";q=500;w=3600',
      },
    ],
    [
      'a tie on what remains: the window that resets later binds, though it comes first',
      [w('minute', 10, 0, 50_000), w('day', 20, 0, 20_000, 86_400)],
      {
        'x-ratelimit-limit': '10',
        'x-ratelimit-remaining': '0',
        'x-ratelimit-reset': String(NOW / 1000 + 50),
        ratelimit: '"minute";r=0;t=50, "day";r=0;t=20',
        'ratelimit-policy': '"minute";q=10;w=60, "day";q=20;w=86400',
      },
    ],
    [
      'a tie on what remains: the window that resets later binds, when it comes last',
      [w('minute', 10, 0, 20_000), w('day', 20, 0, 50_000, 86_400)],
      {
        'x-ratelimit-limit': '20',
        'x-ratelimit-remaining': '0',
        'x-ratelimit-reset': String(NOW / 1000 + 50),
        ratelimit: '"minute";r=0;t=20, "day";r=0;t=50',
        'ratelimit-policy': '"minute";q=10;w=60, "day";q=20;w=86400',
      },
    ],
    [
      'a tie on what remains and on the reset: the first window binds',
      [w('minute', 10, 2, 20_000), w('hour', 30, 2, 20_000, 3_600)],
      {
        'x-ratelimit-limit': '10',
        'x-ratelimit-remaining': '2',
        'x-ratelimit-reset': String(NOW / 1000 + 20),
        ratelimit: '"minute";r=2;t=20, "hour";r=2;t=20',
        'ratelimit-policy': '"minute";q=10;w=60, "hour";q=30;w=3600',
      },
    ],
    [
      'a reset part way through a second: seconds rounded up, never down',
      [w('minute', 60, 1, 1_500)],
      {
        'x-ratelimit-limit': '60',
        'x-ratelimit-remaining': '1',
        'x-ratelimit-reset': String(NOW / 1000 + 2),
        ratelimit: '"minute";r=1;t=2',
        'ratelimit-policy': '"minute";q=60;w=60',
      },
    ],
    [
      'a reset already past: zero seconds left, never less',
      [w('minute', 60, 60, -2_500)],
      {
        'x-ratelimit-limit': '60',
        'x-ratelimit-remaining': '60',
        'x-ratelimit-reset': String(NOW / 1000 - 2),
        ratelimit: '"minute";r=60;t=0',
        'ratelimit-policy': '"minute";q=60;w=60',
      },
    ],
  ])('%s', async (_case, windows, expected) => {
    expect(await headersOf((reply) => setRateLimitHeaders(reply, windows, NOW))).toEqual(expected);
  });

  it('reports every window exhausted until a given moment when the limiter cannot decide', async () => {
    const windows = [w('minute', 60, 40, 30_000), w('day', 1_000, 900, 3_600_000, 86_400)];
    expect(await headersOf((reply) => setRateLimitHeaders(reply, windows, NOW, NOW + 5_000))).toEqual({
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': String(NOW / 1000 + 5),
      ratelimit: '"minute";r=0;t=5, "day";r=0;t=5',
      'ratelimit-policy': '"minute";q=60;w=60, "day";q=1000;w=86400',
    });
  });

  it('names each plan’s own policy: windows differing only in name, limit or length get their own', async () => {
    const policies = [];
    for (const windows of [
      [w('minute', 70, 1, 1_000)],
      [w('hour', 70, 1, 1_000, 60)],
      [w('minute', 71, 1, 1_000)],
      [w('minute', 70, 1, 1_000, 61)],
      [w('minute', 70, 1, 1_000), w('day', 700, 1, 1_000, 86_400)],
      [w('minute', 70, 1, 1_000)],
    ]) {
      policies.push((await headersOf((reply) => setRateLimitHeaders(reply, windows, NOW)))['ratelimit-policy']);
    }
    expect(policies).toEqual([
      '"minute";q=70;w=60',
      '"hour";q=70;w=60',
      '"minute";q=71;w=60',
      '"minute";q=70;w=61',
      '"minute";q=70;w=60, "day";q=700;w=86400',
      '"minute";q=70;w=60',
    ]);
  });
});

describe('the headers of a banned key', () => {
  it('say nothing may be sent until the ban ends, and list the windows as they stand plus the ban', async () => {
    const windows = [w('minute', 60, 0, 30_000), w('day', 1_000, 900, 3_600_000, 86_400)];
    const banEndsAt = NOW + 900_500;
    expect(await headersOf((reply) => setBannedHeaders(reply, windows, NOW, banEndsAt, 900))).toEqual({
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': String(NOW / 1000 + 901),
      ratelimit: '"minute";r=0;t=30, "day";r=900;t=3600, "ban";r=0;t=901',
      'ratelimit-policy': '"minute";q=60;w=60, "day";q=1000;w=86400, "ban";q=0;w=900',
    });
  });

  it('report no window as exhausted when the key was banned with capacity left', async () => {
    const windows = [w('minute', 60, 12, 1_500)];
    expect(await headersOf((reply) => setBannedHeaders(reply, windows, NOW, NOW + 60_000, 60))).toEqual({
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': String(NOW / 1000 + 60),
      ratelimit: '"minute";r=12;t=2, "ban";r=0;t=60',
      'ratelimit-policy': '"minute";q=60;w=60, "ban";q=0;w=60',
    });
  });
});

describe('the headers of a refusal taken before the key is known', () => {
  it('report the per-address minute limit exhausted until the client may retry', async () => {
    expect(await headersOf((reply) => setExhaustedAnonymousHeaders(reply, 30, NOW, NOW + 5_000))).toEqual({
      'x-ratelimit-limit': '30',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': String(NOW / 1000 + 5),
      ratelimit: '"anonymous";r=0;t=5',
      'ratelimit-policy': '"anonymous";q=30;w=60',
    });
  });
});

describe('a request without a usable key, counted against its address', () => {
  const registry = new Registry();
  const metrics = createGatewayMetrics(registry);
  const anonymous = new AnonymousLimiter(2, null, 'test:', () => NOW);
  const charge = keylessCharge(anonymous, metrics, () => NOW);
  const app = Fastify({ trustProxy: true });
  app.get('/', async (request, reply) => {
    const refusal = await charge(request, reply, 'missing');
    const seen = { decision: request.limiterDecision, source: request.limiterSource };
    if (refusal) {
      reply.code(refusal.statusCode).headers(refusal.headers);
      return { error: refusal.code, message: refusal.message, ...seen };
    }
    return { ok: true, ...seen };
  });
  beforeAll(() => app.ready());
  afterAll(() => app.close());
  const get = (ip: string) => app.inject({ method: 'GET', url: '/', headers: { 'x-forwarded-for': ip } });

  it('is answered by the caller while the address has budget, with the address’s headers', async () => {
    const res = await get('198.51.100.1');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true, decision: 'admitted', source: 'address' });
    expect(res.headers['x-ratelimit-limit']).toBe('2');
    expect(res.headers['x-ratelimit-remaining']).toBe('1');
    expect(res.headers.ratelimit).toBe('"anonymous";r=1;t=60');
    expect(res.headers['ratelimit-policy']).toBe('"anonymous";q=2;w=60');
    expect(await registry.getSingleMetricAsString('gateway_anonymous_requests_total')).toContain(
      'gateway_anonymous_requests_total{reason="missing",decision="allowed"} 1',
    );
  });

  it('gets a 429 saying when to retry once the address is over its limit', async () => {
    const ip = '198.51.100.2';
    await get(ip);
    await get(ip);
    const res = await get(ip);
    expect(res.statusCode).toBe(429);
    expect(res.json()).toEqual({
      error: 'rate_limit_exceeded',
      message: 'Too many requests without a valid API key from this address',
      decision: 'limited',
      source: 'address',
    });
    // The address's minute started a moment ago (rate-limiter-flexible keeps its own clock): a
    // little under 60 s left, rounded up to whole seconds.
    expect(res.headers['retry-after']).toBe('60');
    expect(res.headers['x-ratelimit-remaining']).toBe('0');
    expect(await registry.getSingleMetricAsString('gateway_anonymous_requests_total')).toContain(
      'gateway_anonymous_requests_total{reason="missing",decision="limited"} 1',
    );
  });
});
