import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import {
  type FleetClient,
  type FleetNetwork,
  fleets,
  httpFleet,
  impatientClient,
  politeWorkers,
  runFleet,
} from '../support/clients.js';
import { ADMIN_TOKEN, addKey, bearer, type TestGateway, useGateways } from '../support/helpers.js';
import { testClock } from '../support/test-clock.js';

/**
 * Two gateway instances on real sockets sharing one Redis (and one key store, standing in for
 * MongoDB), as two replicas of one deployment: how they share limits and bans. Key sync between
 * them is replicas.test.ts; this part is apart so that `npm run mutate -- sync` need not run it.
 */
const gateways = useGateways();

async function replicas(env: Record<string, string> = {}, now?: () => number) {
  const keyStore = new MemoryKeyStore();
  const prefix = `r${Date.now()}${Math.random().toString(36).slice(2, 6)}:`;
  const make = async () => {
    const gw = await gateways.start({ prefix, env, keyStore, ...(now ? { now } : {}) });
    await gw.listen();
    return gw;
  };
  const a = await make();
  const b = await make();
  return { a, b };
}

/** The poll at its longest (REVOCATION_POLL_MS), so only pub/sub can be what brings a change. */
const POLL_MAX = '60000';

async function get(gw: TestGateway, key: string) {
  const res = await fetch(`${gw.url}/v1/pets`, { headers: bearer(key) });
  const body = (await res.json()) as { code?: string };
  return { status: res.status, code: body.code, headers: res.headers };
}

describe('two gateway replicas sharing one Redis', () => {
  it('admit exactly 60 of 150 concurrent requests on one free key, and count only those against the day', async () => {
    const { a, b } = await replicas({ BAN_THRESHOLD: '1000' });
    const { key } = await addKey(a.deps, 'free');
    const results = await Promise.all(Array.from({ length: 150 }, (_, i) => get(i % 2 ? a : b, key)));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(60);
    expect(statuses.filter((s) => s === 429)).toHaveLength(90);
    expect(results.filter((r) => r.status === 429).every((r) => r.code === 'rate_limit_exceeded')).toBe(true);
    // Both replicas took part.
    const after = await get(a, key);
    expect(after.status).toBe(429);
    expect(after.headers.get('ratelimit')).toContain('"day";r=940;');
  });

  it('serve a key again on every replica once its ban runs out, the one that remembered it included', async () => {
    // The poll at its longest: only the ban's own end can free the key on B.
    const { a, b } = await replicas({ BAN_THRESHOLD: '3', BAN_SECONDS: '1', REVOCATION_POLL_MS: POLL_MAX });
    const { key } = await addKey(a.deps, 'enterprise', { perMinute: 1, perDay: 100 });
    expect((await get(a, key)).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await get(a, key)).code).toBe('rate_limit_exceeded');
    expect((await get(a, key)).code).toBe('api_key_banned');
    expect((await get(b, key)).code).toBe('api_key_banned');
    // Over the ban's one second, B answers from its memory of the ban without asking Redis.
    await vi.waitFor(async () => expect((await get(b, key)).code).toBe('rate_limit_exceeded'), {
      timeout: 5_000,
      interval: 100,
    });
    // A remembered the ban too; one refusal each after it stays under the threshold of 3.
    expect((await get(a, key)).code).toBe('rate_limit_exceeded');
  });

  it('never ban 50 workers sharing a key across both, each honouring the Retry-After of its one 429', async () => {
    const { a, b } = await replicas();
    const { id, key } = await addKey(a.deps, 'enterprise', { perMinute: 20, perDay: 1_000 });
    const workers = await politeWorkers(50, (worker) => get(worker % 2 ? a : b, key));
    const answers = workers.flat();
    expect(answers.filter((x) => x.status === 200)).toHaveLength(20);
    expect(workers.map((w) => w.filter((x) => x.status === 429).length)).toEqual(Array(50).fill(1));
    expect(answers.filter((x) => x.code === 'api_key_banned')).toHaveLength(0);
    const usage = await b.admin.inject({ url: `/admin/keys/${id}/usage`, headers: bearer(ADMIN_TOKEN) });
    // Each 429 counts while its Retry-After runs: 50, one per worker, and no more.
    expect(usage.json()).toMatchObject({ ban: null, refusals: 50 });
  });

  it('ban a client that keeps sending to both for 2 s after its 429', async () => {
    const { a, b } = await replicas();
    const { key } = await addKey(a.deps, 'enterprise', { perMinute: 20, perDay: 1_000 });
    const answers = await impatientClient(2_000, (i) => get(i % 2 ? a : b, key));
    expect(answers.at(-1)?.code).toBe('api_key_banned');
  });
});

/** The free plan's limits (60 a minute, 1,000 a day) in sliding windows, as a plans file would set them. */
function slidingFreePlan(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'replica-limits-')), 'plans.json');
  writeFileSync(
    path,
    JSON.stringify({ plans: { free: { windows: { minute: 60, day: 1000 }, algorithm: 'sliding' } } }),
  );
  return path;
}

describe('fleets sharing a free key through both replicas, on a clock the test moves', () => {
  /** Two replicas at their default ban policy, on one clock; the Redis state they share ages with it. */
  async function onClock(plan: 'fixed' | 'sliding') {
    const clock = testClock();
    const { a, b } = await replicas(plan === 'sliding' ? { PLANS_FILE: slidingFreePlan() } : {}, clock.now);
    clock.ages({ client: a.redis as Redis, prefix: a.config.redisPrefix });
    const { id, key } = await addKey(a.deps, 'free');
    return { a, b, clock, id, key };
  }

  /** Client i sends to replica A when i is even, else to B, over the network given. */
  function through(a: TestGateway, b: TestGateway, key: string, network: FleetNetwork) {
    const http = httpFleet(network);
    onTestFinished(() => http.close());
    return (client: number) => http.get(client, `${(client % 2 ? b : a).url}/v1/pets`, bearer(key));
  }

  interface PoliteFleet {
    name: string;
    clients: () => FleetClient[];
    /** Requests that fill the window before the fleet starts. */
    fill: number;
    plan: 'fixed' | 'sliding';
    connections: FleetNetwork['connections'];
  }
  const polite: PoliteFleet[] = [
    {
      name: '14 clients of one request each, 0.5 s apart, after the window filled',
      clients: () => fleets.oneRequestEach(14, 500),
      fill: 60,
      plan: 'fixed',
      connections: 'new',
    },
    {
      name: '15 pollers each every 5 s, sleeping Retry-After on a 429',
      clients: () => fleets.pollers(15, 5_000),
      fill: 0,
      plan: 'fixed',
      connections: 'keep-alive',
    },
    ...(['fixed', 'sliding'] as const).map((plan) => ({
      name: '20 workers starting 3 s apart, sleeping Retry-After on a 429',
      clients: () => fleets.workers(20, 3_000, 200),
      fill: 0,
      plan,
      connections: plan === 'fixed' ? ('keep-alive' as const) : ('new' as const),
    })),
    {
      name: '50 workers starting 100 ms apart, sleeping Retry-After on a 429',
      clients: () => fleets.workers(50, 100, 100),
      fill: 0,
      plan: 'sliding',
      connections: 'keep-alive',
    },
  ];
  const cases = polite.flatMap((c) => (['one', 'many'] as const).map((addresses) => ({ ...c, addresses })));

  it.each(cases)(
    'never ban $name ($plan plan, $connections connections, $addresses address)',
    async ({ clients, fill, plan, connections, addresses }) => {
      const { a, b, clock, id, key } = await onClock(plan);
      for (let i = 0; i < fill; i++)
        expect((await fetch(`${a.url}/v1/pets`, { headers: bearer(key) })).status).toBe(200);
      const fleet = clients();
      const run = await runFleet(fleet, clock, through(a, b, key, { addresses, connections }), 120_000);
      expect(run.bannedAt).toBeNull();
      expect(run.answers.filter((x) => x.code === 'rate_limit_exceeded').length).toBeGreaterThanOrEqual(14);
      const usage = await b.admin.inject({ url: `/admin/keys/${id}/usage`, headers: bearer(ADMIN_TOKEN) });
      expect(usage.json().ban).toBeNull();
      expect(usage.json().refusals).toBeLessThanOrEqual(fleet.length);
    },
  );

  it.each(['fixed', 'sliding'] as const)(
    'ban a client sending every 100 ms to both into a full window within 15 s of its first 429, on its 51st refusal (%s plan)',
    async (plan) => {
      const { a, b, clock, key } = await onClock(plan);
      // Sliding: the window filled one a second, so that room comes back every second.
      for (let i = 0; i < 60; i++) {
        expect((await fetch(`${a.url}/v1/pets`, { headers: bearer(key) })).status).toBe(200);
        if (plan === 'sliding') await clock.advance(1_000);
      }
      const http = through(a, b, key, { addresses: 'one', connections: 'keep-alive' });
      let sent = 0;
      const run = await runFleet(fleets.rude(100), clock, () => http(sent++), 60_000);
      const firstRefusal = run.answers.find((x) => x.status === 429)?.at ?? 0;
      expect(run.bannedAt).not.toBeNull();
      expect((run.bannedAt ?? 0) - firstRefusal).toBeLessThanOrEqual(15_000);
      // Counted exactly across the two: the threshold's worth of refusals, then the ban.
      expect(run.answers.filter((x) => x.code === 'rate_limit_exceeded')).toHaveLength(50);
      for (const gw of [a, b]) expect((await get(gw, key)).code).toBe('api_key_banned');
    },
  );
});
