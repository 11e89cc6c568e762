import { describe, expect, it, vi } from 'vitest';
import { MemoryKeyStore } from '../src/keys/memory-key-store.js';
import { impatientClient, politeWorkers } from './clients.js';
import { ADMIN_TOKEN, addKey, bearer, type TestGateway, useGateways } from './helpers.js';

/**
 * Two gateway instances on real sockets sharing one Redis (and one key store, standing in for
 * MongoDB), as two replicas of one deployment: how they share limits and bans. Key sync between
 * them is replicas.test.ts; this part is apart so that `npm run mutate -- sync` need not run it.
 */
const gateways = useGateways();

async function replicas(env: Record<string, string> = {}) {
  const keyStore = new MemoryKeyStore();
  const prefix = `r${Date.now()}${Math.random().toString(36).slice(2, 6)}:`;
  const make = async () => {
    const gw = await gateways.start({
      prefix,
      env,
      keyStore,
    });
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
