import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '@animal-store/gateway/test/support/cli.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { containerRuntime } from '../support/runtime.js';
import { type Stack, startStack } from '../support/stack.js';

/**
 * The spec's flows end to end, through the gateway only: real HTTP to a running stack (images
 * built from this repository with MongoDB and Redis where a container runtime exists, else the
 * services as processes on a real Redis; see tests/support/stack.ts), keys from the admin API
 * and the keys CLI.
 */

// Building both images from scratch takes minutes; processes start in seconds.
const HOOK_TIMEOUT = (await containerRuntime()) ? 600_000 : 60_000;
const RUN = Math.random().toString(36).slice(2, 8);

let stack: Stack;
let workDir: string;
let keysFile: string;
/** Free keys that exist only in API_KEYS_FILE, which every gateway of this run loads. */
let fileKey: Printed;
let warmUpKey: Printed;
let proKey: string;

interface Printed {
  id: string;
  key: string;
  plan: string;
  limits: { perMinute: number; perDay: number };
}

interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
}

interface Pet {
  id: number;
  name: string;
  categoryId: number;
  status?: string;
}

/** The CLI's --json output: exactly one line holding one JSON object. */
function printed(run: { code: number; stdout: string; stderr: string }): Printed {
  expect(run.code, run.stderr).toBe(0);
  const lines = run.stdout.trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0] as string) as Printed;
}

async function answer(response: Response): Promise<Answer> {
  const text = await response.text();
  let body: unknown = text;
  if (response.headers.get('content-type')?.includes('application/json') && text) body = JSON.parse(text);
  return { status: response.status, headers: response.headers, body };
}

/** Every API response carries the rate-limit headers, whatever its status. */
function expectRateLimitHeaders(res: Answer): void {
  const limit = res.headers.get('x-ratelimit-limit');
  const remaining = res.headers.get('x-ratelimit-remaining');
  const reset = res.headers.get('x-ratelimit-reset');
  expect(limit, `X-RateLimit-Limit on a ${res.status}`).toMatch(/^[1-9]\d*$/);
  expect(remaining, `X-RateLimit-Remaining on a ${res.status}`).toMatch(/^\d+$/);
  expect(Number(remaining)).toBeLessThanOrEqual(Number(limit));
  expect(reset, `X-RateLimit-Reset on a ${res.status}`).toMatch(/^[1-9]\d*$/);
  expect(res.headers.get('ratelimit'), `RateLimit on a ${res.status}`).toBeTruthy();
  expect(res.headers.get('ratelimit-policy'), `RateLimit-Policy on a ${res.status}`).toBeTruthy();
}

function expectError(res: Answer, status: number, code?: string): void {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toContain('application/json');
  expect(res.body).toEqual({ code: code ?? expect.any(String), message: expect.any(String), status });
}

/** One API request through a gateway (the stack's unless `base` is given); checks the rate-limit headers. */
async function api(
  method: string,
  path: string,
  options: { key?: string | null; json?: unknown; raw?: string; base?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  const key = options.key === undefined ? proKey : options.key;
  if (key !== null) headers.authorization = `Bearer ${key}`;
  if (options.json !== undefined) headers['content-type'] = 'application/json';
  const res = await answer(
    await fetch(new URL(path, options.base ?? stack.gatewayUrl), {
      method,
      headers,
      ...(options.json !== undefined ? { body: JSON.stringify(options.json) } : {}),
      ...(options.raw !== undefined ? { body: options.raw } : {}),
    }),
  );
  expectRateLimitHeaders(res);
  return res;
}

async function admin(method: string, path: string, json?: unknown): Promise<Answer> {
  return answer(
    await fetch(new URL(path, stack.adminUrl), {
      method,
      headers: {
        authorization: `Bearer ${stack.adminToken}`,
        ...(json !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
    }),
  );
}

async function createKey(plan: string): Promise<{ id: string; key: string }> {
  const res = await admin('POST', '/admin/keys', { plan, name: `integration-${RUN}-${plan}` });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as { id: string; key: string };
}

async function createPet(pet: { name: string; categoryId: number; status?: string }): Promise<Pet> {
  const res = await api('POST', '/v1/pets', { json: pet });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const created = res.body as Pet;
  expect(created).toEqual({ ...pet, id: expect.any(Number) });
  expect(Number.isSafeInteger(created.id) && created.id > 0).toBe(true);
  expect(res.headers.get('location')).toBe(`/v1/pets?id=${created.id}`);
  return created;
}

function nextLink(res: Answer): string | null {
  const link = res.headers.get('link');
  if (!link) return null;
  return /<([^>]+)>\s*;\s*rel="next"/.exec(link)?.[1] ?? null;
}

beforeAll(async () => {
  workDir = await mkdtemp(join(tmpdir(), 'integration-'));
  keysFile = join(workDir, 'api-keys.json');
  // Made before the stack starts: the gateway reads API_KEYS_FILE once, at start.
  fileKey = printed(
    await runCli(['create', '--plan', 'free', '--name', `replicas-${RUN}`, '--file', keysFile, '--json']),
  );
  warmUpKey = printed(
    await runCli(['create', '--plan', 'free', '--name', `warm-up-${RUN}`, '--file', keysFile, '--json']),
  );
  stack = await startStack({
    apiKeysFile: keysFile,
    // Staging's strict mode: should Redis ever be too slow for a request, it shows as a 503 instead of
    // silently counting in a per-replica fallback. A loaded CI machine gets a generous Redis timeout.
    gatewayEnv: { RATE_LIMIT_FAILURE_MODE: 'closed', REDIS_COMMAND_TIMEOUT_MS: '2000' },
  });
  proKey = (await createKey('pro')).key;
}, HOOK_TIMEOUT);

afterAll(async () => {
  await stack?.stop();
  if (workDir) await rm(workDir, { recursive: true, force: true });
}, HOOK_TIMEOUT);

describe('the stack', () => {
  it('runs as containers or, without a runtime, as processes and names what it skipped', () => {
    // Containers run everything but MongoDB where no image of it exists (the local podman engine).
    if (stack.mode === 'containers') expect(stack.skipped).toEqual(stack.mongoUrl ? [] : ['MongoDB']);
    else expect(stack.skipped).toContain('container images');
  });
});

describe('public documents', () => {
  it('serves /v1/openapi.json without a key', async () => {
    const res = await answer(await fetch(`${stack.gatewayUrl}/v1/openapi.json`));
    expect(res.status).toBe(200);
    const doc = res.body as {
      openapi: string;
      servers: { url: string }[];
      paths: Record<string, Record<string, { operationId?: string }>>;
    };
    expect(doc.openapi).toMatch(/^3\./);
    // As the spec has it: a base address ending in /v1, paths relative to it.
    expect(doc.servers[0]?.url).toBe('/v1');
    expect(doc.paths['/pets']?.get?.operationId).toBe('listPets');
    expect(doc.paths['/pets']?.post?.operationId).toBe('createPet');
    expect(doc.paths['/pets/{petId}']?.get?.operationId).toBe('getPet');
  });

  it('serves the /docs reference page without a key', async () => {
    const res = await fetch(`${stack.gatewayUrl}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/html');
    expect((await res.text()).toLowerCase()).toContain('swagger');
  });
});

describe('authentication', () => {
  it('answers 401 missing_api_key without a key', async () => {
    expectError(await api('GET', '/v1/pets', { key: null }), 401, 'missing_api_key');
    expectError(
      await api('POST', '/v1/pets', { key: null, json: { name: 'x', categoryId: 1 } }),
      401,
      'missing_api_key',
    );
    expectError(await api('GET', '/v1/pets/1', { key: null }), 401, 'missing_api_key');
  });

  it('answers 401 invalid_api_key for a key it never issued', async () => {
    const res = await api('GET', '/v1/pets', { key: `ask_${'x'.repeat(43)}` });
    expectError(res, 401, 'invalid_api_key');
  });
});

describe('pets through the gateway', () => {
  it('creates a pet: 201, Location and the body with its id', async () => {
    const pet = await createPet({ name: `Rex-${RUN}`, categoryId: 1, status: 'available' });
    // Without the optional status.
    const plain = await createPet({ name: `Plain-${RUN}`, categoryId: 2 });
    expect(plain.id).toBeGreaterThan(pet.id);
  });

  it('lists with limit and a status filter, page by page along the Link next cursor', async () => {
    const statuses = ['available', 'pending', 'available', 'sold', 'available', 'available', 'pending'];
    const created: Pet[] = [];
    for (const [i, status] of statuses.entries()) {
      created.push(await createPet({ name: `List-${RUN}-${i}`, categoryId: 10 + i, status }));
    }
    const available = created.filter((p) => p.status === 'available').map((p) => p.id);
    const firstId = created[0]?.id as number;

    // From just before this test's pets, two at a time, following rel="next" until it is gone.
    let path: string | null = `/v1/pets?limit=2&status=available&after=${firstId - 1}`;
    const seen: number[] = [];
    const pages: Pet[][] = [];
    while (path && pages.length < 50) {
      const res = await api('GET', path);
      expect(res.status).toBe(200);
      const page = res.body as Pet[];
      expect(page.length).toBeLessThanOrEqual(2);
      for (const pet of page) expect(pet.status).toBe('available');
      pages.push(page);
      seen.push(...page.map((p) => p.id));
      path = nextLink(res);
      if (path) expect(path).toMatch(/^\/v1\/pets\?.*after=\d+/);
    }
    expect(path).toBeNull();
    expect(pages[0]).toHaveLength(2);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual(expect.arrayContaining(available));

    // Without a status, every status comes back; without a limit, at most 20.
    const all = await api('GET', `/v1/pets?after=${firstId - 1}&limit=100`);
    expect(all.status).toBe(200);
    expect((all.body as Pet[]).map((p) => p.id)).toEqual(expect.arrayContaining(created.map((p) => p.id)));
    const byDefault = await api('GET', '/v1/pets');
    expect(byDefault.status).toBe(200);
    expect((byDefault.body as Pet[]).length).toBeLessThanOrEqual(20);
  });

  it('gets a pet by id with Deprecation and Sunset headers, and 404 for a missing id', async () => {
    const pet = await createPet({ name: `Get-${RUN}`, categoryId: 7, status: 'sold' });
    const found = await api('GET', `/v1/pets/${pet.id}`);
    expect(found.status).toBe(200);
    expect(found.body).toEqual(pet);
    expect(found.headers.get('deprecation')).toMatch(/^@\d+$/);
    expect(found.headers.get('sunset')).toBe('Thu, 05 Dec 2030 00:00:00 GMT');
    expect(found.headers.get('link')).toContain('/v1/pets');

    const missing = await api('GET', '/v1/pets/9007199254740000');
    expectError(missing, 404, 'not_found');
    expect(missing.headers.get('deprecation')).toMatch(/^@\d+$/);
    expect(missing.headers.get('sunset')).toBe('Thu, 05 Dec 2030 00:00:00 GMT');
  });

  it('answers 400 for an invalid body', async () => {
    const bodies = [
      { categoryId: 1 },
      { name: 'NoCategory' },
      { name: '', categoryId: 1 },
      { name: 'Str', categoryId: '1' },
      { name: 'Float', categoryId: 1.5 },
      { name: 'Status', categoryId: 1, status: 'lost' },
      { name: { $gt: '' }, categoryId: 1 },
    ];
    for (const body of bodies) expectError(await api('POST', '/v1/pets', { json: body }), 400, 'invalid_request');
    const malformed = await api('POST', '/v1/pets', {
      raw: '{"name":"Rex",',
      headers: { 'content-type': 'application/json' },
    });
    expectError(malformed, 400, 'invalid_request');
  });

  it('answers 400 for a bad query or path id', async () => {
    for (const query of ['limit=0', 'limit=101', 'limit=abc', 'limit=2.5', 'status=lost', 'limit=1&limit=2']) {
      expectError(await api('GET', `/v1/pets?${query}`), 400, 'invalid_request');
    }
    expectError(await api('GET', '/v1/pets/abc'), 400, 'invalid_request');
  });
});

describe('rate limits', () => {
  it('a free key gets exactly 60 requests a minute, then 429 with Retry-After', async () => {
    const { key } = await createKey('free');
    const results: Answer[] = [];
    for (let i = 0; i < 61; i++) results.push(await api('GET', '/v1/pets?limit=1', { key }));
    const admitted = results.filter((r) => r.status === 200);
    expect(admitted).toHaveLength(60);
    for (const [i, res] of admitted.entries()) {
      expect(res.headers.get('x-ratelimit-limit')).toBe('60');
      expect(res.headers.get('x-ratelimit-remaining')).toBe(String(59 - i));
    }
    const refused = results[60] as Answer;
    expectError(refused, 429, 'rate_limit_exceeded');
    expect(refused.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect(Number(refused.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    expect(refused.headers.get('x-ratelimit-limit')).toBe('60');
    expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
  });

  it('two gateway replicas sharing one Redis admit exactly 60 of 150 concurrent requests on one free key', async () => {
    const second = await stack.startGatewayReplica({
      apiKeysFile: keysFile,
      env: { RATE_LIMIT_FAILURE_MODE: 'closed', REDIS_COMMAND_TIMEOUT_MS: '2000' },
    });
    try {
      const bases = [stack.gatewayUrl, second.url];
      // A few requests on another key first, so that neither replica meets the burst cold. A replica
      // just started on a loaded host may still answer one 503 (its Redis connection, or shedding
      // by event-loop delay, as in production): a client tries again, and so does the warm-up.
      for (const base of bases) {
        for (let i = 0; i < 3; i++)
          await vi.waitFor(
            async () => {
              const res = await api('GET', '/v1/pets?limit=1', { key: warmUpKey.key, base });
              expect(res.status, JSON.stringify(res.body)).toBe(200);
            },
            { timeout: 15_000, interval: 250 },
          );
      }
      const results = await Promise.all(
        Array.from({ length: 150 }, (_, i) => api('GET', '/v1/pets?limit=1', { key: fileKey.key, base: bases[i % 2] })),
      );
      const statuses = results.map((r) => r.status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(60);
      expect(statuses.filter((s) => s === 429)).toHaveLength(90);
      for (const res of results.filter((r) => r.status === 429)) {
        // Past BAN_THRESHOLD refusals the key is banned: still a 429, with its own code.
        expect(['rate_limit_exceeded', 'api_key_banned']).toContain((res.body as { code: string }).code);
        expect(res.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
      }
      // Both replicas hold the same count: each refuses the next request.
      for (const base of bases) expect((await api('GET', '/v1/pets', { key: fileKey.key, base })).status).toBe(429);
    } finally {
      await second.stop();
    }
  });
});

describe('key administration', () => {
  it('revoking a key through the admin API makes the gateway answer 401', async () => {
    const { id, key } = await createKey('pro');
    expect((await api('GET', '/v1/pets', { key })).status).toBe(200);
    const revoked = await admin('DELETE', `/admin/keys/${id}`);
    expect(revoked.status).toBe(204);
    // The design's bound for every replica; this one, the revoking one, answers at once.
    await vi.waitFor(async () => expectError(await api('GET', '/v1/pets', { key }), 401, 'invalid_api_key'), {
      timeout: 5_000,
      interval: 100,
    });
    const shown = await admin('GET', `/admin/keys/${id}`);
    expect(shown.status).toBe(200);
    expect((shown.body as { revokedAt?: string }).revokedAt).toEqual(expect.any(String));
  });

  it('the admin API refuses a wrong token', async () => {
    const res = await answer(
      await fetch(new URL('/admin/keys', stack.adminUrl), {
        headers: { authorization: 'Bearer not-the-token-at-all' },
      }),
    );
    expect(res.status).toBe(401);
  });

  it('the keys CLI creates a key through the admin API, and the gateway accepts it', async () => {
    const created = printed(
      await runCli(['create', '--plan', 'pro', '--json'], { ADMIN_URL: stack.adminUrl, ADMIN_TOKEN: stack.adminToken }),
    );
    // The same fields as the admin API's create answer.
    expect(created).toEqual({
      id: expect.any(String),
      key: expect.any(String),
      plan: 'pro',
      name: created.id,
      limits: { perMinute: 300, perDay: 10_000 },
      scopes: ['pets:read', 'pets:write'],
      createdAt: expect.any(String),
    });
    const res = await api('GET', '/v1/pets', { key: created.key });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ratelimit-limit')).toBe('300');
    const listed = await admin('GET', '/admin/keys?limit=1');
    expect((listed.body as { items: Array<{ id: string }> }).items.map((k) => k.id)).toEqual([created.id]);
  });
});
