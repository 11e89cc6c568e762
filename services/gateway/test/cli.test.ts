import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { hashApiKey } from '../src/keys/api-key.js';
import { ADMIN_TOKEN, bearer, startEchoUpstream, startGateway, type TestGateway } from './helpers.js';

const CLI = resolve(fileURLToPath(new URL('.', import.meta.url)), '../dist/cli/keys.js');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the built CLI with exactly the given environment on top of PATH (no ADMIN_* leaks in from outside). */
function cli(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 15_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        done({ code, stdout, stderr });
      },
    );
  });
}

interface Printed {
  id: string;
  key: string;
  plan: string;
  limits: { perMinute: number; perDay: number };
}

/** stdout must be exactly one line holding one JSON object. */
function oneJsonLine(run: Run): Printed {
  expect(run.code, run.stderr).toBe(0);
  expect(run.stdout.endsWith('\n')).toBe(true);
  const lines = run.stdout.slice(0, -1).split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0] as string);
}

type Upstream = Awaited<ReturnType<typeof startEchoUpstream>>;
let upstream: Upstream;

beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build first (npx tsc -b; npm test does it)`);
  upstream = await startEchoUpstream();
});

afterAll(async () => {
  await upstream?.close();
});

describe('keys CLI with --file (API_KEYS_FILE records)', () => {
  let dir: string;
  let file: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-cli-'));
    file = join(dir, 'keys.json');
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function records(): Promise<Array<Record<string, unknown>>> {
    return JSON.parse(await readFile(file, 'utf8'));
  }

  it('create --json prints one JSON line and appends a hash-only record to a new file', async () => {
    const run = await cli(['create', '--plan', 'free', '--file', file, '--json']);
    const printed = oneJsonLine(run);
    expect(run.stderr).toBe('');
    expect(Object.keys(printed).sort()).toEqual(['id', 'key', 'limits', 'plan']);
    expect(printed.plan).toBe('free');
    expect(printed.limits).toEqual({ perMinute: 60, perDay: 1000 });
    expect(printed.key).toMatch(/^ask_[0-9A-Za-z]{46}$/);

    const text = await readFile(file, 'utf8');
    expect(text).not.toContain(printed.key);
    expect(text).not.toContain(printed.key.slice(4));
    expect(JSON.parse(text)).toEqual([
      { id: printed.id, name: printed.id, plan: 'free', sha256: hashApiKey(printed.key) },
    ]);
    // Only its owner can read it.
    expect((await stat(file)).mode & 0o777).toBe(0o600);
  });

  it('a second create appends, keeping the first record', async () => {
    const first = oneJsonLine(await cli(['create', '--plan', 'free', '--file', file, '--json']));
    const second = oneJsonLine(
      await cli(['create', '--plan', 'business', '--name', 'reports', '--file', file, '--json']),
    );
    expect(second.id).not.toBe(first.id);
    expect(second.key).not.toBe(first.key);
    expect(await records()).toEqual([
      { id: first.id, name: first.id, plan: 'free', sha256: hashApiKey(first.key) },
      { id: second.id, name: 'reports', plan: 'business', sha256: hashApiKey(second.key) },
    ]);
    const text = await readFile(file, 'utf8');
    expect(text).not.toContain(first.key);
    expect(text).not.toContain(second.key);
  });

  it('create --plan enterprise with both limits records them', async () => {
    const printed = oneJsonLine(
      await cli(['create', '--plan', 'enterprise', '--per-minute', '5', '--per-day', '50', '--file', file, '--json']),
    );
    expect(printed).toMatchObject({ plan: 'enterprise', limits: { perMinute: 5, perDay: 50 } });
    expect(await records()).toEqual([
      {
        id: printed.id,
        name: printed.id,
        plan: 'enterprise',
        limits: { perMinute: 5, perDay: 50 },
        sha256: hashApiKey(printed.key),
      },
    ]);
  });

  it('without --json prints the key for people, once', async () => {
    const run = await cli(['create', '--plan', 'pro', '--file', file]);
    expect(run.code, run.stderr).toBe(0);
    const [record] = await records();
    expect(run.stdout).toContain(`created ${record?.id} (pro: 300/min, 10000/day)`);
    const key = /key: (ask_\S+)/.exec(run.stdout)?.[1] as string;
    expect(hashApiKey(key)).toBe(record?.sha256);
  });

  const usageErrors: Array<[string, string[], RegExp]> = [
    ['enterprise without limits', ['create', '--plan', 'enterprise'], /enterprise keys need limits/],
    [
      '--per-minute without --per-day',
      ['create', '--plan', 'enterprise', '--per-minute', '5'],
      /--per-minute and --per-day/,
    ],
    [
      '--per-day without --per-minute',
      ['create', '--plan', 'enterprise', '--per-day', '5'],
      /--per-minute and --per-day/,
    ],
    [
      'limits on a free key',
      ['create', '--plan', 'free', '--per-minute', '5', '--per-day', '50'],
      /only enterprise keys take limits/,
    ],
    [
      'perMinute above perDay',
      ['create', '--plan', 'enterprise', '--per-minute', '51', '--per-day', '50'],
      /cannot exceed/,
    ],
    [
      'a non-numeric limit',
      ['create', '--plan', 'enterprise', '--per-minute', 'five', '--per-day', '50'],
      /positive integer/,
    ],
    ['a zero limit', ['create', '--plan', 'enterprise', '--per-minute', '0', '--per-day', '50'], /positive integer/],
    ['an unknown plan', ['create', '--plan', 'gold'], /plan must be one of/],
    ['no plan', ['create'], /plan must be one of/],
    ['an unknown option', ['create', '--plan', 'free', '--colour', 'red'], /colour/],
  ];

  for (const [label, args, message] of usageErrors) {
    it(`exits 2 with a message on stderr for ${label}, writing nothing`, async () => {
      const run = await cli([...args, '--file', file, '--json']);
      expect(run.code).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(message);
      expect(run.stderr).toContain('usage:');
      expect(existsSync(file)).toBe(false);
    });
  }

  it('exits 2 for an unknown command', async () => {
    const run = await cli(['rotate', '--plan', 'free']);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/unknown command "rotate"/);
  });

  it('refuses to append to a file that is not a valid keys file, and leaves it as it was', async () => {
    await writeFile(file, '{"not": "an array"}');
    const run = await cli(['create', '--plan', 'free', '--file', file, '--json']);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/JSON array/);
    expect(await readFile(file, 'utf8')).toBe('{"not": "an array"}');
  });

  it('a gateway started on the file accepts the printed keys with their limits', async () => {
    const free = oneJsonLine(await cli(['create', '--plan', 'free', '--file', file, '--json']));
    const ent = oneJsonLine(
      await cli(['create', '--plan', 'enterprise', '--per-minute', '5', '--per-day', '50', '--file', file, '--json']),
    );
    const gw = await startGateway({ env: { API_KEYS_FILE: file }, upstream: upstream.url });
    try {
      const a = await gw.app.inject({ url: '/v1/pets', headers: bearer(free.key) });
      expect(a.statusCode, a.body).toBe(200);
      expect(a.headers['x-ratelimit-limit']).toBe('60');
      expect(a.json().headers['x-api-key-id']).toBe(free.id);
      const b = await gw.app.inject({ url: '/v1/pets', headers: bearer(ent.key) });
      expect(b.statusCode, b.body).toBe(200);
      expect(b.headers['x-ratelimit-limit']).toBe('5');
      expect(b.headers['ratelimit-policy']).toBe('"minute";q=5;w=60, "day";q=50;w=86400');
      expect(b.json().headers['x-api-plan']).toBe('enterprise');
      // A key that is not in the file is refused.
      const other = oneJsonLine(await cli(['create', '--plan', 'free', '--file', join(dir, 'other.json'), '--json']));
      const c = await gw.app.inject({ url: '/v1/pets', headers: bearer(other.key) });
      expect(c.statusCode).toBe(401);
      expect(c.json().code).toBe('invalid_api_key');
    } finally {
      await gw.close();
    }
  });
});

describe('keys CLI writers on one file', () => {
  it('keep every record when several append at once', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gateway-cli-race-'));
    try {
      const file = join(dir, 'keys.json');
      const runs = await Promise.all(
        Array.from({ length: 8 }, () => cli(['create', '--plan', 'free', '--file', file, '--json'])),
      );
      const printed = runs.map(oneJsonLine);
      const records = JSON.parse(await readFile(file, 'utf8')) as Array<{ id: string; sha256: string }>;
      expect(records).toHaveLength(8);
      expect(new Set(records.map((r) => r.sha256))).toEqual(new Set(printed.map((p) => hashApiKey(p.key))));
      expect(existsSync(`${file}.lock`)).toBe(false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('keys CLI through the admin API', () => {
  let gw: TestGateway;
  let env: Record<string, string>;

  beforeAll(async () => {
    gw = await startGateway({ upstream: upstream.url });
    await gw.admin.listen({ host: '127.0.0.1', port: 0 });
    env = {
      ADMIN_URL: `http://127.0.0.1:${(gw.admin.server.address() as AddressInfo).port}`,
      ADMIN_TOKEN,
    };
  });

  afterAll(async () => {
    await gw?.close();
  });

  it('create, list, show, revoke: the revoked key is then refused by the gateway', async () => {
    const created = oneJsonLine(await cli(['create', '--plan', 'pro', '--name', 'from cli', '--json'], env));
    expect(Object.keys(created).sort()).toEqual(['id', 'key', 'limits', 'plan']);
    expect(created).toMatchObject({ plan: 'pro', limits: { perMinute: 300, perDay: 10000 } });
    const ok = await gw.app.inject({ url: '/v1/pets', headers: bearer(created.key) });
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['x-ratelimit-limit']).toBe('300');

    const list = await cli(['list'], env);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).not.toContain(created.key);
    const listed = JSON.parse(list.stdout) as Array<Record<string, unknown>>;
    expect(listed.find((k) => k.id === created.id)).toMatchObject({ name: 'from cli', plan: 'pro', source: 'store' });

    const show = await cli(['show', created.id], env);
    expect(show.code, show.stderr).toBe(0);
    expect(JSON.parse(show.stdout)).toMatchObject({ id: created.id, plan: 'pro' });

    const revoke = await cli(['revoke', created.id], env);
    expect(revoke.code, revoke.stderr).toBe(0);
    expect(revoke.stdout).toContain(created.id);
    const refused = await gw.app.inject({ url: '/v1/pets', headers: bearer(created.key) });
    expect(refused.statusCode).toBe(401);
    expect(refused.json().code).toBe('invalid_api_key');
  });

  it('creates an enterprise key with its limits', async () => {
    const created = oneJsonLine(
      await cli(['create', '--plan', 'enterprise', '--per-minute', '7', '--per-day', '70', '--json'], env),
    );
    expect(created.limits).toEqual({ perMinute: 7, perDay: 70 });
    const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(created.key) });
    expect(res.headers['x-ratelimit-limit']).toBe('7');
  });

  it('unban exits 0 for a known key', async () => {
    const created = oneJsonLine(await cli(['create', '--plan', 'free', '--json'], env));
    const run = await cli(['unban', created.id], env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(created.id);
  });

  it('exits 2 without ADMIN_TOKEN, and creates nothing', async () => {
    const before = (await gw.admin.inject({ url: '/admin/keys', headers: bearer(ADMIN_TOKEN) })).json().length;
    for (const args of [['create', '--plan', 'pro', '--json'], ['list'], ['revoke', 'key_x']]) {
      const run = await cli(args, { ADMIN_URL: env.ADMIN_URL as string });
      expect(run.code).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(/ADMIN_TOKEN/);
    }
    expect((await gw.admin.inject({ url: '/admin/keys', headers: bearer(ADMIN_TOKEN) })).json()).toHaveLength(before);
  });

  it('exits 2 when a command needs an id and none is given', async () => {
    for (const command of ['show', 'revoke', 'unban']) {
      const run = await cli([command], env);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/needs a key id/);
    }
  });

  it('exits 1 with the admin API message for a wrong token or an unknown id', async () => {
    const wrong = await cli(['list'], { ...env, ADMIN_TOKEN: `${ADMIN_TOKEN}-wrong` });
    expect(wrong.code).toBe(1);
    expect(wrong.stdout).toBe('');
    expect(wrong.stderr).toMatch(/401/);
    const unknown = await cli(['revoke', 'key_0000000000000000'], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/404/);
    expect(unknown.stderr).toMatch(/key_0000000000000000/);
  });
});
