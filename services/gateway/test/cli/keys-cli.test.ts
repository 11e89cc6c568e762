import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../src/keys/api-key.js';
import { createKey } from '../../src/keys/create-key.js';
import { CLI, type Run, runCli } from '../support/cli.js';
import { ADMIN_TOKEN, bearer, startEchoUpstream, startGateway, type TestGateway } from '../support/helpers.js';

const cli = runCli;

interface Printed {
  id: string;
  key: string;
  plan: string;
  limits: { perMinute: number; perDay: number };
  createdAt: string;
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
    // The fields the admin API's create answers.
    expect(Object.keys(printed).sort()).toEqual(['createdAt', 'id', 'key', 'limits', 'name', 'plan', 'scopes']);
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
    [
      'enterprise without limits',
      ['create', '--plan', 'enterprise'],
      /enterprise keys need limits \(--per-second, --per-minute, --per-hour, --per-day or --per-month\)/,
    ],
    [
      'perMinute above perDay',
      ['create', '--plan', 'enterprise', '--per-minute', '51', '--per-day', '50'],
      /--per-minute cannot exceed --per-day/,
    ],
    [
      'a free key’s own minute above its plan’s day',
      ['create', '--plan', 'free', '--per-minute', '5000'],
      /--per-minute cannot exceed --per-day/,
    ],
    [
      'an unknown scope',
      ['create', '--plan', 'free', '--scopes', 'pets:read,pets:delete'],
      /--scopes may hold only pets:read, pets:write/,
    ],
    [
      'a bad CIDR',
      ['create', '--plan', 'free', '--allow-cidr', '10.0.0.0/40'],
      /--allow-cidr: "10.0.0.0\/40" has a prefix length outside 0–32/,
    ],
    [
      'a non-numeric limit',
      ['create', '--plan', 'enterprise', '--per-minute', 'five', '--per-day', '50'],
      /positive integer/,
    ],
    ['a zero limit', ['create', '--plan', 'enterprise', '--per-minute', '0', '--per-day', '50'], /positive integer/],
    ['an unknown plan', ['create', '--plan', 'gold'], /--plan must be one of free, pro, business, enterprise/],
    ['no plan', ['create'], /create needs --plan/],
    [
      'an expiry that is not RFC 3339',
      ['create', '--plan', 'free', '--expires-at', 'tomorrow'],
      /--expires-at must be an RFC 3339 timestamp/,
    ],
    [
      'an expiry on a day that does not exist',
      ['create', '--plan', 'free', '--expires-at', '2031-11-31T00:00:00Z'],
      /--expires-at is not a real date and time/,
    ],
    [
      'an expiry at 24:00',
      ['create', '--plan', 'free', '--expires-at', '2031-11-30T24:00:00Z'],
      /--expires-at is not a real date and time/,
    ],
    [
      'an expiry in the past',
      ['create', '--plan', 'free', '--expires-at', '2020-01-01T00:00:00Z'],
      /--expires-at must be in the future/,
    ],
    ['an unknown option', ['create', '--plan', 'free', '--colour', 'red'], /colour/],
    [
      'a name with a terminal escape',
      ['create', '--plan', 'free', '--name', 'acme\u001b[2J'],
      /--name must not contain control or bidirectional-override characters/,
    ],
    [
      'a name with a right-to-left override',
      ['create', '--plan', 'free', '--name', 'acme\u202egnp.exe'],
      /--name must not contain control or bidirectional-override characters/,
    ],
  ];

  for (const [label, args, message] of usageErrors) {
    it(`exits 2 with a message on stderr for ${label}, writing nothing`, async () => {
      const run = await cli([...args, '--file', file, '--json']);
      expect(run.code).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(message);
      // The command's own usage line, not the whole manual.
      expect(run.stderr).toContain('usage: npm run -s keys -- create --plan');
      expect(run.stderr).not.toContain('unban ID');
      expect(existsSync(file)).toBe(false);
    });
  }

  it('exits 2 for an unknown command', async () => {
    const run = await cli(['rotat', '--plan', 'free']);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(
      /unknown command "rotat"; commands: create, list, show, update, rotate, usage, history, top, revoke, unban, bans/,
    );
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

  it('rotate --file swaps the hash and keeps the old one as previous; a gateway on the file takes both', async () => {
    const created = oneJsonLine(await cli(['create', '--plan', 'pro', '--file', file, '--json']));
    const before = Date.now();
    const run = await cli(['rotate', created.id, '--grace', '3600', '--file', file, '--json']);
    const rotated = oneJsonLine(run) as Printed & { previousKeyExpiresAt: string };
    expect(rotated).toMatchObject({ id: created.id, plan: 'pro', limits: { perMinute: 300, perDay: 10000 } });
    expect(rotated.key).not.toBe(created.key);
    const ends = Date.parse(rotated.previousKeyExpiresAt);
    expect(ends).toBeGreaterThanOrEqual(before + 3_600_000);
    expect(ends).toBeLessThan(before + 3_660_000);
    const text = await readFile(file, 'utf8');
    expect(text).not.toContain(rotated.key);
    expect(JSON.parse(text)).toEqual([
      {
        id: created.id,
        name: created.id,
        plan: 'pro',
        sha256: hashApiKey(rotated.key),
        previous: { sha256: hashApiKey(created.key), expiresAt: rotated.previousKeyExpiresAt },
      },
    ]);
    const gw = await startGateway({ env: { API_KEYS_FILE: file }, upstream: upstream.url });
    try {
      for (const key of [created.key, rotated.key]) {
        const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(key) });
        expect(res.statusCode, res.body).toBe(200);
        expect(res.json().headers['x-api-key-id']).toBe(created.id);
      }
    } finally {
      await gw.close();
    }
  });

  it('update --file never extends a previous secret: a cleared expiry leaves it ending at the old one', async () => {
    const created = oneJsonLine(await cli(['create', '--plan', 'pro', '--file', file, '--json']));
    oneJsonLine(await cli(['rotate', created.id, '--grace', '3600', '--file', file, '--json']));
    // Inside the hour of grace: the key, and so the old secret, ends in a minute.
    const soon = new Date(Date.now() + 60_000).toISOString();
    oneJsonLine(await cli(['update', created.id, '--expires-at', soon, '--file', file, '--json']));
    oneJsonLine(await cli(['update', created.id, '--no-expiry', '--file', file, '--json']));
    const [entry] = await records();
    expect(entry).not.toHaveProperty('expiresAt');
    expect(entry?.previous).toEqual({ sha256: hashApiKey(created.key), expiresAt: soon });
  });

  it('create and update --file set a key’s own limits, scopes and addresses, and drop them again', async () => {
    const created = oneJsonLine(
      await cli([
        'create',
        '--plan',
        'free',
        '--per-hour',
        '500',
        '--scopes',
        'pets:read',
        '--allow-cidr',
        '203.0.113.0/24',
        '--allow-cidr',
        '2001:DB8::1',
        '--file',
        file,
        '--json',
      ]),
    );
    expect(created.limits).toEqual({ perMinute: 60, perHour: 500, perDay: 1000 });
    expect(await records()).toEqual([
      expect.objectContaining({
        id: created.id,
        limits: { perHour: 500 },
        scopes: ['pets:read'],
        allowedCidrs: ['203.0.113.0/24', '2001:db8::1/128'],
      }),
    ]);
    const up = await cli(['update', created.id, '--plan-limits', '--plan-scopes', '--any-address', '--file', file]);
    expect(up.code, up.stderr).toBe(0);
    const [entry] = await records();
    expect(entry).not.toHaveProperty('limits');
    expect(entry).not.toHaveProperty('scopes');
    expect(entry).not.toHaveProperty('allowedCidrs');
  });

  it('update --plan-credits --file drops a lone key’s own credit terms, so its plan’s apply again', async () => {
    const created = oneJsonLine(await cli(['create', '--plan', 'free', '--file', file, '--json']));
    const [entry] = await records();
    await writeFile(file, JSON.stringify([{ ...entry, credits: { refill: { amount: 5, every: 'day' } } }]));
    const up = await cli(['update', created.id, '--plan-credits', '--file', file]);
    expect(up.code, up.stderr).toBe(0);
    const [after] = await records();
    expect(after).toEqual(entry);
    expect(after).not.toHaveProperty('credits');
  });

  it.each([
    ['without PLANS_FILE', false],
    ['with PLANS_FILE', true],
  ])(
    'update --file keeps a key’s own limits through a rename, an expiry, scopes and addresses, %s; a gateway on the file enforces them',
    async (_label, withPlans) => {
      const env: Record<string, string> = {};
      if (withPlans) {
        env.PLANS_FILE = join(dir, 'plans.json');
        await writeFile(env.PLANS_FILE, JSON.stringify({ plans: { free: { windows: { minute: 60, day: 1000 } } } }));
      }
      const created = oneJsonLine(
        await cli(['create', '--plan', 'free', '--per-minute', '100', '--file', file, '--json'], env),
      );
      const changes = [
        ['--name', 'renamed'],
        ['--expires-at', '2099-01-01T00:00:00Z'],
        ['--no-expiry'],
        ['--scopes', 'pets:read'],
        ['--allow-cidr', '127.0.0.0/8'],
      ];
      for (const change of changes) {
        const printed = oneJsonLine(await cli(['update', created.id, ...change, '--file', file, '--json'], env));
        expect(printed.limits, change.join(' ')).toEqual({ perMinute: 100, perDay: 1000 });
        const [entry] = await records();
        expect(entry?.limits, change.join(' ')).toEqual({ perMinute: 100 });
      }
      const gw = await startGateway({ env: { API_KEYS_FILE: file, ...env }, upstream: upstream.url });
      try {
        const res = await gw.app.inject({ url: '/v1/pets', headers: bearer(created.key) });
        expect(res.statusCode, res.body).toBe(200);
        expect(res.headers['x-ratelimit-limit']).toBe('100');
      } finally {
        await gw.close();
      }
    },
  );

  it('update --file changes plan, limits, name and expiry of one entry, with the same rules as the API', async () => {
    const a = oneJsonLine(await cli(['create', '--plan', 'free', '--file', file, '--json']));
    const b = oneJsonLine(await cli(['create', '--plan', 'free', '--file', file, '--json']));
    const up = await cli([
      'update',
      a.id,
      '--plan',
      'enterprise',
      '--per-minute',
      '9',
      '--per-day',
      '90',
      '--name',
      'acme',
      '--expires-at',
      '2031-01-01T00:00:00Z',
      '--file',
      file,
    ]);
    expect(up.code, up.stderr).toBe(0);
    expect(up.stdout).toMatch(/updated .* \(enterprise: 9\/min, 90\/day, expires 2031-01-01 00:00:00Z\)/);
    const refused = await cli(['update', a.id, '--plan', 'pro', '--per-minute', '3', '--per-day', '2', '--file', file]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--per-minute cannot exceed --per-day/);
    const down = await cli(['update', a.id, '--plan', 'pro', '--no-expiry', '--file', file, '--json']);
    expect(down.code, down.stderr).toBe(0);
    const [first, second] = JSON.parse(await readFile(file, 'utf8'));
    expect(first).toEqual({ id: a.id, name: 'acme', plan: 'pro', sha256: hashApiKey(a.key) });
    expect(second).toEqual({ id: b.id, name: b.id, plan: 'free', sha256: hashApiKey(b.key) });
    const missing = await cli(['update', 'key_nope', '--plan', 'pro', '--file', file]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/has no key with id key_nope/);
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
    expect(created).toMatchObject({ plan: 'pro', limits: { perMinute: 300, perDay: 10000 } });
    const ok = await gw.app.inject({ url: '/v1/pets', headers: bearer(created.key) });
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['x-ratelimit-limit']).toBe('300');

    const list = await cli(['list', '--json'], env);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).not.toContain(created.key);
    const listed = JSON.parse(list.stdout).items as Array<Record<string, unknown>>;
    expect(listed.find((k) => k.id === created.id)).toMatchObject({ name: 'from cli', plan: 'pro', source: 'store' });

    const show = await cli(['show', created.id, '--json'], env);
    expect(show.code, show.stderr).toBe(0);
    expect(JSON.parse(show.stdout)).toMatchObject({ id: created.id, plan: 'pro' });

    const revoke = await cli(['revoke', created.id], env);
    expect(revoke.code, revoke.stderr).toBe(0);
    expect(revoke.stdout).toBe(`revoked ${created.id}\n`);
    const refused = await gw.app.inject({ url: '/v1/pets', headers: bearer(created.key) });
    expect(refused.statusCode).toBe(401);
    expect(refused.json().code).toBe('invalid_api_key');
  });

  it('create --json prints what the admin API answers, field for field, optional fields included', async () => {
    const flags = ['--plan', 'pro', '--name', 'same', '--scopes', 'pets:read', '--allow-cidr', '203.0.113.0/24'];
    const expiry = '2031-01-01T00:00:00Z';
    const printed = oneJsonLine(await cli(['create', ...flags, '--expires-at', expiry, '--json'], env));
    const answered = await gw.admin.inject({
      method: 'POST',
      url: '/admin/keys',
      headers: bearer(ADMIN_TOKEN),
      payload: {
        plan: 'pro',
        name: 'same',
        scopes: ['pets:read'],
        allowedCidrs: ['203.0.113.0/24'],
        expiresAt: expiry,
      },
    });
    const api = answered.json();
    expect(Object.keys(printed).sort()).toEqual(Object.keys(api).sort());
    const { id, key, createdAt, ...rest } = api;
    expect(printed).toEqual({ ...rest, id: printed.id, key: printed.key, createdAt: printed.createdAt });
    expect(printed).toMatchObject({ scopes: ['pets:read'], allowedCidrs: ['203.0.113.0/24'], name: 'same' });
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
    const before = (await gw.admin.inject({ url: '/admin/keys', headers: bearer(ADMIN_TOKEN) })).json().items.length;
    for (const args of [['create', '--plan', 'pro', '--json'], ['list'], ['revoke', 'key_x']]) {
      const run = await cli(args, { ADMIN_URL: env.ADMIN_URL as string });
      expect(run.code).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(/ADMIN_TOKEN/);
    }
    expect((await gw.admin.inject({ url: '/admin/keys', headers: bearer(ADMIN_TOKEN) })).json().items).toHaveLength(
      before,
    );
  });

  it('prints a stored name that holds control or bidi characters as \\u{..} escapes, never raw', async () => {
    // A record from before names were checked, put straight into the store.
    const name = 'old\u001b[2Jkey\u202egnp.exe\u0085\u007f';
    const { record } = createKey({ plan: 'free', name });
    await gw.deps.keyStore.insert(record);
    const escaped = 'old\\u{1b}[2Jkey\\u{202e}gnp.exe\\u{85}\\u{7f}';
    /** Any control (besides the line ends the CLI writes) or bidi override, as a terminal gets it. */
    const raw = (text: string) =>
      [...text].some((c) => {
        const cp = c.codePointAt(0) as number;
        return (cp < 0x20 && c !== '\n') || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e);
      });

    const show = await cli(['show', record.id], env);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toMatch(new RegExp(`\\nname: +${escaped.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&')}\\n`));
    expect(raw(show.stdout)).toBe(false);

    const list = await cli(['list'], env);
    expect(list.code, list.stderr).toBe(0);
    expect(
      list.stdout
        .split('\n')
        .find((line) => line.startsWith(record.id))
        ?.endsWith(` ${escaped}`),
    ).toBe(true);
    expect(raw(list.stdout)).toBe(false);

    // JSON keeps the name exactly, in \\u escapes a terminal does not act on.
    const json = await cli(['show', record.id, '--json'], env);
    expect(raw(json.stdout)).toBe(false);
    expect(JSON.parse(json.stdout).name).toBe(name);
  });

  it('exits 2 when a command needs an id and none is given', async () => {
    for (const command of ['show', 'revoke', 'unban']) {
      const run = await cli([command], env);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/needs a key id/);
    }
  });

  it('a wrong ADMIN_TOKEN: says the token was refused and where the right one is, not how to send one', async () => {
    const wrong = await cli(['list'], { ...env, ADMIN_TOKEN: `${ADMIN_TOKEN}-wrong` });
    expect(wrong.code).toBe(1);
    expect(wrong.stdout).toBe('');
    expect(wrong.stderr).toBe(
      `keys: the admin API at ${env.ADMIN_URL} refused ADMIN_TOKEN (401): it is not the token this gateway runs with. ` +
        'Under npm start, paste the "export ADMIN_URL=… ADMIN_TOKEN=…" line it printed (each run makes a new one); ' +
        "otherwise use the gateway's own ADMIN_TOKEN (or the file ADMIN_TOKEN_FILE names).\n",
    );
  });

  it('ADMIN_URL at the public port: says so and names ADMIN_PORT, for every command', async () => {
    await gw.app.listen({ host: '127.0.0.1', port: 0 });
    const publicUrl = `http://127.0.0.1:${(gw.app.server.address() as AddressInfo).port}`;
    for (const args of [['list'], ['show', 'key_0000000000000000'], ['create', '--plan', 'free']]) {
      const run = await cli(args, { ADMIN_URL: publicUrl, ADMIN_TOKEN });
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(
        new RegExp(
          `^keys: ${publicUrl} is the gateway's public API, not its admin API \\(it answered 401 invalid_api_key\\)\\. ` +
            'The admin API listens on ADMIN_PORT \\(default 8081\\)',
        ),
      );
    }
  });

  it('exits 1 with the admin API message for an unknown id', async () => {
    const unknown = await cli(['revoke', 'key_0000000000000000'], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/404/);
    expect(unknown.stderr).toMatch(/key_0000000000000000/);
  });
});

describe('keys CLI lifecycle commands through the admin API', () => {
  let gw: TestGateway;
  let env: Record<string, string>;

  beforeAll(async () => {
    gw = await startGateway({ upstream: upstream.url });
    await gw.admin.listen({ host: '127.0.0.1', port: 0 });
    env = { ADMIN_PORT: String((gw.admin.server.address() as AddressInfo).port), ADMIN_TOKEN };
  });

  afterAll(async () => {
    await gw?.close();
  });

  const call = (key: string) => gw.app.inject({ url: '/v1/pets', headers: bearer(key) });

  // Six CLI runs, each a Node start.
  it('list pages: --limit and --after, --all to walk them, filters by name, plan and customer', async () => {
    const tag = `pager${Date.now()}`;
    for (const plan of ['free', 'pro', 'free']) {
      oneJsonLine(await cli(['create', '--plan', plan, '--name', `${tag} ${plan}`, '--json'], env));
    }
    const first = await cli(['list', '--name', tag, '--limit', '2'], env);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout.match(/^key_/gm)).toHaveLength(2);
    const cursor = /^more: --after (\S+)$/m.exec(first.stdout)?.[1] as string;
    const second = JSON.parse(
      (await cli(['list', '--name', tag, '--limit', '2', '--after', cursor, '--json'], env)).stdout,
    );
    expect(second).toMatchObject({ items: [{ name: `${tag} free` }], next: null });
    const all = await cli(['list', '--name', tag.toUpperCase(), '--limit', '1', '--all', '--json'], env);
    expect(all.code, all.stderr).toBe(0);
    const names = all.stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line).name);
    expect(names).toEqual([`${tag} free`, `${tag} pro`, `${tag} free`]);
    const pro = JSON.parse((await cli(['list', '--name', tag, '--plan', 'pro', '--json'], env)).stdout);
    expect(pro.items.map((k: { name: string }) => k.name)).toEqual([`${tag} pro`]);
    const none = await cli(['list', '--customer', 'cus_nobody'], env);
    expect(none.stdout).toBe('no keys\n');
  });

  // Several CLI runs, each a Node start.
  it('create --expires-at, update --plan (counts carry over), usage, rotate: text for people, JSON with --json', {
    timeout: 60_000,
  }, async () => {
    const created = oneJsonLine(
      await cli(['create', '--plan', 'free', '--name', 'trial', '--expires-at', '2031-06-01T00:00:00Z', '--json'], env),
    );
    expect(created).toMatchObject({ plan: 'free', expiresAt: '2031-06-01T00:00:00.000Z' });
    for (let i = 0; i < 50; i++) await call(created.key);

    const updated = await cli(['update', created.id, '--plan', 'pro'], env);
    expect(updated.code, updated.stderr).toBe(0);
    expect(updated.stdout).toMatch(/^updated key_\w+\nid: +key_/);
    expect(updated.stdout).toMatch(/plan: +pro\n/);
    expect(updated.stdout).toMatch(/expires: +2031-06-01 00:00:00Z/);
    const next = await call(created.key);
    expect(next.headers['x-ratelimit-limit']).toBe('300');
    expect(next.headers['x-ratelimit-remaining']).toBe('249');

    const usage = await cli(['usage', created.id], env);
    expect(usage.code, usage.stderr).toBe(0);
    expect(usage.stdout).toMatch(/WINDOW +LIMIT +USED +REMAINING +RESETS/);
    expect(usage.stdout).toMatch(/minute +300 +51 +249 +\d{4}-/);
    expect(usage.stdout).toMatch(/day +10000 +51 +9949 +\d{4}-/);
    expect(usage.stdout).toMatch(/ban: +none\nrefusals: +none toward a ban\n/);
    const usageJson = JSON.parse((await cli(['usage', created.id, '--json'], env)).stdout);
    expect(usageJson.windows.minute).toMatchObject({ limit: 300, used: 51, remaining: 249 });

    const rotated = await cli(['rotate', created.id, '--grace', '0'], env);
    expect(rotated.code, rotated.stderr).toBe(0);
    const newKey = /key: (ask_\S+)/.exec(rotated.stdout)?.[1] as string;
    expect(rotated.stdout).toMatch(/rotated key_\w+: the old key works until/);
    expect((await call(newKey)).statusCode).toBe(200);
    expect((await call(created.key)).json().code).toBe('expired_api_key');

    const noExpiry = JSON.parse((await cli(['update', created.id, '--no-expiry', '--json'], env)).stdout);
    expect(noExpiry).not.toHaveProperty('expiresAt');
    expect(noExpiry.plan).toBe('pro');
  });

  // Ten CLI runs, each a Node start.
  it('history draws a key’s hours as bars with totals, and top ranks the keys with totals per plan', {
    timeout: 60_000,
  }, async () => {
    const created = oneJsonLine(await cli(['create', '--plan', 'pro', '--name', 'charted', '--json'], env));
    for (let i = 0; i < 3; i++) expect((await call(created.key)).statusCode).toBe(200);

    const hourly = await cli(['history', created.id, '--days', '1'], env);
    expect(hourly.code, hourly.stderr).toBe(0);
    const lines = hourly.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(new RegExp(`^${created.id}: hourly from .* \\(█ admitted, ░ refused\\)$`));
    // 24 rows, one an hour; this hour's bar is the whole width, the others empty.
    expect(lines).toHaveLength(1 + 24 + 1);
    expect(lines[24]).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}h {2}█{36} +3$/);
    expect(lines.slice(1, 24).every((line) => /^\d{4}-\d{2}-\d{2} \d{2}h$/.test(line))).toBe(true);
    expect(lines[25]).toBe('total: 3 admitted (3 units), 0 refused (0 by limit, 0 by ban), 0 forbidden');

    const daily = JSON.parse((await cli(['history', created.id, '--json'], env)).stdout);
    expect(daily.granularity).toBe('day');
    expect(daily.series).toHaveLength(7);
    expect(daily.totals.admitted).toBe(3);

    const top = await cli(['top', '--sort', 'admitted', '--limit', '5'], env);
    expect(top.code, top.stderr).toBe(0);
    expect(top.stdout).toMatch(/^top keys by admitted, 24h from /);
    expect(top.stdout).toMatch(new RegExp(`${created.id} +charted +pro +3 +0 +0 +3`));
    expect(top.stdout).toMatch(/by plan\nPLAN +KEYS +ADMITTED +REFUSED +UNITS\n/);

    // This month so far, a row a day: on the 1st, one row.
    const month = JSON.parse((await cli(['history', created.id, '--period', 'current', '--json'], env)).stdout);
    const monthStart = `${new Date().toISOString().slice(0, 8)}01T00:00:00.000Z`;
    expect(month).toMatchObject({ granularity: 'day', from: monthStart });
    expect(month.series).toHaveLength(new Date().getUTCDate());
    expect(month.totals.admitted).toBe(3);
    const badPeriod = await cli(['history', created.id, '--period', 'last'], env);
    expect(badPeriod.code).toBe(2);
    expect(badPeriod.stderr).toContain('--period must be current or previous');

    const badDays = await cli(['history', created.id, '--days', '401'], env);
    expect(badDays.code).toBe(2);
    expect(badDays.stderr).toContain('--days must be a whole number from 1 to 400');
    const badWindow = await cli(['top', '--window', 'week'], env);
    expect(badWindow.code).toBe(1);
    expect(badWindow.stderr).toMatch(/400/);
  });

  it('update --name, --expires-at and --scopes keep a key’s own limits: the answer and the next request say 100', async () => {
    const created = oneJsonLine(await cli(['create', '--plan', 'free', '--per-minute', '100', '--json'], env));
    for (const change of [
      ['--name', 'renamed'],
      ['--expires-at', '2099-01-01T00:00:00Z'],
      ['--scopes', 'pets:read'],
    ]) {
      const printed = oneJsonLine(await cli(['update', created.id, ...change, '--json'], env));
      expect(printed.limits, change.join(' ')).toEqual({ perMinute: 100, perDay: 1000 });
      const next = await call(created.key);
      expect(next.statusCode, next.body).toBe(200);
      expect(next.headers['x-ratelimit-limit'], change.join(' ')).toBe('100');
    }
  });

  it('list and show print tables by default and JSON with --json', async () => {
    const created = oneJsonLine(await cli(['create', '--plan', 'business', '--name', 'tabled', '--json'], env));
    const list = await cli(['list'], env);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/^ID +PLAN +LIMITS +STATUS +EXPIRES +SOURCE +NAME\n/);
    expect(list.stdout).toMatch(new RegExp(`${created.id} +business +1000/min, 100000/day +active +- +store +tabled`));
    expect(list.stdout).not.toContain(created.key);
    const show = await cli(['show', created.id], env);
    expect(show.stdout).toMatch(new RegExp(`^id: +${created.id}\nname: +tabled\nplan: +business\n`));
    const listed = JSON.parse((await cli(['list', '--json'], env)).stdout);
    expect(listed).toEqual({ items: expect.any(Array), next: null });
    const revoked = JSON.parse((await cli(['revoke', created.id, '--json'], env)).stdout);
    expect(revoked).toEqual({ id: created.id, revoked: true });
    expect((await cli(['show', created.id], env)).stdout).toMatch(/status: +revoked/);
  });

  // Several CLI runs, each a Node start.
  it('usage words the refusals as the key stands: toward a ban, then none while banned', {
    timeout: 60_000,
  }, async () => {
    // A low threshold, so a handful of refusals ban the key.
    const strict = await startGateway({ upstream: upstream.url, env: { BAN_THRESHOLD: '10' } });
    try {
      await strict.admin.listen({ host: '127.0.0.1', port: 0 });
      const strictEnv = { ADMIN_PORT: String((strict.admin.server.address() as AddressInfo).port), ADMIN_TOKEN };
      const created = oneJsonLine(
        await cli(['create', '--plan', 'enterprise', '--per-minute', '1', '--per-day', '100', '--json'], strictEnv),
      );
      const send = () => strict.app.inject({ url: '/v1/pets', headers: bearer(created.key) });
      expect((await send()).statusCode).toBe(200);
      for (let i = 0; i < 3; i++) expect((await send()).json().code).toBe('rate_limit_exceeded');
      const counting = await cli(['usage', created.id], strictEnv);
      expect(counting.stdout).toMatch(/\nban: +none\nrefusals: +3 toward a ban\n$/);
      // More than BAN_THRESHOLD (10) refusals whose Retry-After still runs ban the key.
      let last = '';
      for (let i = 0; i < 10 && last !== 'api_key_banned'; i++) last = (await send()).json().code;
      expect(last).toBe('api_key_banned');
      const banned = await cli(['usage', created.id], strictEnv);
      expect(banned.stdout).toMatch(
        /\nban: +until \d{4}-\S+ \S+\nrefusals: +none \(counting starts again when the ban ends\)\n$/,
      );
      // The bans in force, as the admin API lists them: this key, and a count of one.
      const bans = await cli(['bans'], strictEnv);
      expect(bans.code, bans.stderr).toBe(0);
      expect(bans.stdout).toMatch(
        new RegExp(
          `^ID +BANNED UNTIL +CUSTOMER +NAME\n${created.id} +\\d{4}-\\S+ \\S+ +- +${created.id}\n1 banned now\n$`,
        ),
      );
      const listed = JSON.parse((await cli(['bans', '--json'], strictEnv)).stdout);
      expect(listed).toMatchObject({ count: 1, items: [{ id: created.id, name: created.id }] });
      await cli(['unban', created.id], strictEnv);
      expect((await cli(['bans'], strictEnv)).stdout).toBe('no key is banned\n');
    } finally {
      await strict.close();
    }
  });

  // Several CLI runs, each a Node start.
  it('says what the admin API refused in the flags that were typed, exiting 2 as for a mistake in the call', {
    timeout: 60_000,
  }, async () => {
    const created = oneJsonLine(await cli(['create', '--plan', 'free', '--json'], env));
    const flagsNeeded = '(--per-second, --per-minute, --per-hour, --per-day or --per-month)';
    for (const args of [
      ['update', created.id, '--plan', 'enterprise'],
      ['create', '--plan', 'enterprise'],
    ]) {
      const run = await cli(args, env);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr.split('\n')[0]).toBe(`keys: enterprise keys need limits ${flagsNeeded}`);
      expect(run.stderr).toContain(`usage: npm run -s keys -- ${args[0]} `);
    }
    const order = await cli(['create', '--plan', 'free', '--per-minute', '2000'], env);
    expect(order.stderr.split('\n')[0]).toBe('keys: --per-minute cannot exceed --per-day');
    const plan = await cli(['create', '--plan', 'gold'], env);
    expect(plan.stderr.split('\n')[0]).toBe('keys: --plan must be one of free, pro, business, enterprise');
    const cidr = await cli(['update', created.id, '--allow-cidr', '10.0.0.0/33'], env);
    expect(cidr.stderr).toMatch(/^keys: --allow-cidr: "10\.0\.0\.0\/33" /);
    const grace = await cli(['rotate', created.id, '--grace', '604801'], env);
    expect(grace.code).toBe(2);
    expect(grace.stderr).toMatch(/--grace must be a whole number of seconds from 0 to 604800/);
    const nothing = await cli(['update', created.id], env);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toMatch(/nothing to change/);
  });

  it.each([
    ['ADMIN_URL as host:port', (port: string) => ({ ADMIN_URL: `127.0.0.1:${port}` })],
    ['ADMIN_URL with a scheme and a trailing slash', (port: string) => ({ ADMIN_URL: `http://127.0.0.1:${port}/` })],
    ['ADMIN_PORT alone', (port: string) => ({ ADMIN_PORT: port })],
    ['ADMIN_HOST 0.0.0.0 and ADMIN_PORT', (port: string) => ({ ADMIN_HOST: '0.0.0.0', ADMIN_PORT: port })],
  ])('finds the admin API from %s', async (_label, where) => {
    const run = await cli(['list', '--json'], { ADMIN_TOKEN, ...where(env.ADMIN_PORT as string) });
    expect(run.code, run.stderr).toBe(0);
    expect(Array.isArray(JSON.parse(run.stdout).items)).toBe(true);
  });

  it('prefers ADMIN_URL over ADMIN_PORT', async () => {
    const run = await cli(['list', '--json'], {
      ADMIN_TOKEN,
      ADMIN_URL: `127.0.0.1:${env.ADMIN_PORT}`,
      ADMIN_PORT: '1',
    });
    expect(run.code, run.stderr).toBe(0);
  });
});

describe('keys CLI history with the pets service down', () => {
  let gw: TestGateway;
  let env: Record<string, string>;

  beforeAll(async () => {
    gw = await startGateway({ upstream: 'http://127.0.0.1:9' });
    await gw.admin.listen({ host: '127.0.0.1', port: 0 });
    env = { ADMIN_PORT: String((gw.admin.server.address() as AddressInfo).port), ADMIN_TOKEN };
  });

  afterAll(async () => {
    await gw?.close();
  });

  it('history and top show the requests pets never served as failed upstream, not admitted, not billed', async () => {
    const created = oneJsonLine(await cli(['create', '--plan', 'pro', '--name', 'unserved', '--json'], env));
    for (let i = 0; i < 2; i++) {
      expect((await gw.app.inject({ url: '/v1/pets', headers: bearer(created.key) })).statusCode).toBe(503);
    }
    const hourly = await cli(['history', created.id, '--days', '1'], env);
    expect(hourly.code, hourly.stderr).toBe(0);
    const lines = hourly.stdout.trimEnd().split('\n');
    expect(lines[24]).toMatch(/ 0 \+2 failed upstream$/);
    expect(lines[25]).toBe(
      'total: 0 admitted (0 units), 0 refused (0 by limit, 0 by ban), 0 forbidden, 2 failed upstream (counted against the limit, not billed)',
    );
    const top = await cli(['top', '--sort', 'upstreamFailed'], env);
    expect(top.code, top.stderr).toBe(0);
    expect(top.stdout).toMatch(/ADMITTED +REFUSED +FORBIDDEN +UNITS +FAILED UPSTREAM\n/);
    expect(top.stdout).toMatch(new RegExp(`${created.id} +unserved +pro +0 +0 +0 +0 +2`));
    expect(top.stdout).toMatch(/total: 1 keys, 0 admitted, 0 refused, 2 failed upstream\n$/);
  });
});

describe('keys CLI when the admin API cannot be reached', () => {
  it('names the URL it tried and why (connection refused), without the usage', async () => {
    // A port that was just free: nothing listens there.
    const probe = await startEchoUpstream();
    const port = new URL(probe.url).port;
    await probe.close();
    const run = await cli(['list'], { ADMIN_TOKEN, ADMIN_PORT: port });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      `keys: cannot reach the admin API at http://127.0.0.1:${port} (connection refused: nothing listens there). ` +
        'Is the gateway running with ADMIN_TOKEN set? Point ADMIN_URL (or ADMIN_HOST/ADMIN_PORT) at its admin listener.\n',
    );
  });

  it.each([
    ['a URL that does not parse', { ADMIN_URL: 'http://[::1' }, /ADMIN_URL=http:\/\/\[::1 is not a URL or host:port/],
    [
      'a scheme that is not http',
      { ADMIN_URL: 'ftp://127.0.0.1:21' },
      /ADMIN_URL=ftp:\/\/127\.0\.0\.1:21 must be http/,
    ],
    ['a port that is not a number', { ADMIN_PORT: 'eighty' }, /ADMIN_PORT=eighty is not a port number/],
  ])('exits 2 for %s', async (_label, where, message) => {
    const run = await cli(['list'], { ADMIN_TOKEN, ...where });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(message);
  });
});
