import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { generateApiKey, hashApiKey } from '../../src/keys/api-key.js';
import {
  appendToKeysFile,
  type KeyFileEntry,
  parseKeysFile,
  toKeyRecord,
  updateKeysFileEntry,
} from '../../src/keys/keys-file.js';
import { DEFAULT_PLANS } from '../../src/plans/plans.js';

const HASH_A = hashApiKey('a');
const HASH_B = hashApiKey('b');

/** The message parseKeysFile throws for `data`; fails the test when it accepts it. */
function problemsOf(data: unknown): string {
  const text = typeof data === 'string' ? data : JSON.stringify(data);
  try {
    parseKeysFile(text, 'keys.json', DEFAULT_PLANS);
  } catch (err) {
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(TypeError);
    return (err as Error).message;
  }
  throw new Error(`parseKeysFile accepted ${text}`);
}

describe('parseKeysFile', () => {
  it('reads valid records, defaulting the name to the id and dropping unknown fields', () => {
    const entries = parseKeysFile(
      JSON.stringify([
        { id: 'key_a', name: 'Team A', plan: 'free', sha256: HASH_A, comment: 'ignored' },
        { id: 'key_b', plan: 'enterprise', limits: { perMinute: 5, perDay: 50 }, sha256: HASH_B },
      ]),
      'keys.json',
      DEFAULT_PLANS,
    ).keys;
    expect(entries).toStrictEqual([
      { id: 'key_a', name: 'Team A', plan: 'free', sha256: HASH_A },
      { id: 'key_b', name: 'key_b', plan: 'enterprise', limits: { perMinute: 5, perDay: 50 }, sha256: HASH_B },
    ]);
  });

  it('reads an empty array', () => {
    expect(parseKeysFile('[]', 'keys.json', DEFAULT_PLANS)).toEqual({ keys: [], customers: [] });
  });

  it('refuses text that is not JSON, naming the file', () => {
    expect(problemsOf('[{"id": ')).toMatch(/^keys\.json is not valid JSON/);
  });

  it.each([['"keys"'], [null], [42]])('refuses %j: the file must hold an array or { keys, customers }', (data) => {
    expect(problemsOf(data)).toMatch(/keys\.json must hold a JSON array of key records, or \{ "keys"/);
  });

  it.each([
    [{}, /keys must be an array/],
    [{ keys: {} }, /keys must be an array/],
    [{ keys: [], customers: {} }, /customers must be an array/],
    [{ keys: [], users: [] }, /unknown field "users"/],
  ])('refuses %j, naming what is wrong', (data, message) => {
    expect(problemsOf(data)).toMatch(message);
  });

  it('refuses entries that are not objects, without crashing on null', () => {
    const message = problemsOf([null, 'x', 42, []]);
    for (const i of [0, 1, 2, 3]) expect(message).toContain(`entry ${i} is not an object`);
    expect(message).not.toContain('duplicate');
  });

  it('reads scopes and allowed addresses, normalising the addresses, and refuses bad ones naming the entry', () => {
    const [entry] = parseKeysFile(
      JSON.stringify([
        {
          id: 'key_a',
          plan: 'free',
          sha256: HASH_A,
          scopes: ['pets:read'],
          allowedCidrs: ['2001:DB8::/32', '203.0.113.9'],
        },
      ]),
      'keys.json',
      DEFAULT_PLANS,
    ).keys;
    expect(entry).toStrictEqual({
      id: 'key_a',
      name: 'key_a',
      plan: 'free',
      scopes: ['pets:read'],
      allowedCidrs: ['2001:db8::/32', '203.0.113.9/32'],
      sha256: HASH_A,
    });
    expect(problemsOf([{ id: 'key_a', plan: 'free', sha256: HASH_A, scopes: ['pets:delete'] }])).toBe(
      'keys.json: entry 0: scopes may hold only pets:read, pets:write',
    );
    // Valid scopes and addresses do not end the checks: the plan is still read.
    expect(
      problemsOf([{ id: 'key_a', plan: 'gold', sha256: HASH_A, scopes: ['pets:read'], allowedCidrs: ['10.0.0.0/8'] }]),
    ).toContain('entry 0: ');
    expect(problemsOf([{ id: 'key_a', plan: 'free', sha256: HASH_A, allowedCidrs: ['10.0.0.0/33'] }])).toBe(
      'keys.json: entry 0: allowedCidrs: "10.0.0.0/33" has a prefix length outside 0–32',
    );
  });

  it('refuses a bad sha256', () => {
    // A list holding a good hash is not a hash either (as text it would look like one).
    for (const sha256 of [
      undefined,
      '',
      'abc',
      HASH_A.toUpperCase(),
      `${HASH_A}0`,
      `${HASH_A.slice(0, 63)}g`,
      42,
      [HASH_A],
    ]) {
      expect(problemsOf([{ id: 'key_a', plan: 'free', sha256 }])).toMatch(/entry 0: sha256 must be 64 lowercase hex/);
    }
  });

  it('refuses a plaintext key where the hash belongs', () => {
    expect(problemsOf([{ id: 'key_a', plan: 'free', sha256: generateApiKey() }])).toMatch(/sha256/);
  });

  it('refuses a missing id, a bad name, a bad plan, limits out of order, enterprise without limits', () => {
    expect(problemsOf([{ plan: 'free', sha256: HASH_A }])).toMatch(/entry 0: id must be a non-empty string/);
    expect(problemsOf([{ id: '', plan: 'free', sha256: HASH_A }])).toMatch(/entry 0: id must be a non-empty string/);
    expect(problemsOf([{ id: 'k', name: 3, plan: 'free', sha256: HASH_A }])).toMatch(/entry 0: name must be a string/);
    expect(problemsOf([{ id: 'k', plan: 'gold', sha256: HASH_A }])).toMatch(/entry 0: plan must be one of/);
    expect(problemsOf([{ id: 'k', sha256: HASH_A }])).toMatch(/entry 0: plan must be one of/);
    expect(problemsOf([{ id: 'k', plan: 'pro', limits: { perMinute: 20_000 }, sha256: HASH_A }])).toMatch(
      /entry 0: limits.perMinute cannot exceed limits.perDay/,
    );
    expect(problemsOf([{ id: 'k', plan: 'enterprise', sha256: HASH_A }])).toMatch(
      /entry 0: enterprise keys need limits/,
    );
  });

  it('refuses enterprise limits that are not positive integers, not ordered, empty or unknown', () => {
    const bad = [
      { perMinute: 0, perDay: 10 },
      { perMinute: 1.5, perDay: 10 },
      { perMinute: '5', perDay: 10 },
      {},
      { perWeek: 5 },
      { perMinute: 11, perDay: 10 },
      { perSecond: 20, perHour: 10 },
      null,
      'lots',
      [5, 50],
    ];
    for (const limits of bad) {
      expect(problemsOf([{ id: 'k', plan: 'enterprise', limits, sha256: HASH_A }]), JSON.stringify(limits)).toMatch(
        /entry 0: limits/,
      );
    }
  });

  it('refuses duplicate ids and duplicate hashes', () => {
    expect(
      problemsOf([
        { id: 'key_a', plan: 'free', sha256: HASH_A },
        { id: 'key_a', plan: 'pro', sha256: HASH_B },
      ]),
    ).toMatch(/duplicate id key_a/);
    expect(
      problemsOf([
        { id: 'key_a', plan: 'free', sha256: HASH_A },
        { id: 'key_b', plan: 'pro', sha256: HASH_A },
      ]),
    ).toMatch(/duplicate sha256 for id key_b/);
  });

  it('keeps an expiry and a previous secret, each timestamp as UTC ISO text', () => {
    const entries = parseKeysFile(
      JSON.stringify([
        {
          id: 'key_a',
          plan: 'free',
          sha256: HASH_A,
          expiresAt: '2031-01-01T01:30:00+01:30',
          previous: { sha256: HASH_B, expiresAt: '2030-06-01t12:00:00.5z', note: 'dropped' },
        },
      ]),
      'keys.json',
      DEFAULT_PLANS,
    ).keys;
    expect(entries).toStrictEqual([
      {
        id: 'key_a',
        name: 'key_a',
        plan: 'free',
        sha256: HASH_A,
        expiresAt: '2031-01-01T00:00:00.000Z',
        previous: { sha256: HASH_B, expiresAt: '2030-06-01T12:00:00.500Z' },
      },
    ]);
  });

  it('accepts an expiry at any real moment: the last second of a year or a month, a leap day, a space for T', () => {
    const moments = [
      ['2031-12-31T23:59:59Z', '2031-12-31T23:59:59.000Z'],
      ['2031-04-30t23:59:59.999z', '2031-04-30T23:59:59.999Z'],
      ['2032-02-29 12:00:00+00:00', '2032-02-29T12:00:00.000Z'],
    ];
    for (const [expiresAt, iso] of moments) {
      const [entry] = parseKeysFile(
        JSON.stringify([{ id: 'key_a', plan: 'free', sha256: HASH_A, expiresAt }]),
        'k.json',
        DEFAULT_PLANS,
      ).keys;
      expect(entry?.expiresAt, expiresAt).toBe(iso);
    }
  });

  it('refuses an expiry that is not an RFC 3339 timestamp, naming the entry and showing the format', () => {
    for (const [expiresAt, got] of [
      ['tomorrow', ', got "tomorrow"'],
      ['2031-01-01', ', got "2031-01-01"'],
      [42, ''],
    ]) {
      expect(problemsOf([{ id: 'key_a', plan: 'free', sha256: HASH_A, expiresAt }])).toBe(
        `keys.json: entry 0: expiresAt must be an RFC 3339 timestamp (e.g. 2030-12-31T23:59:59Z)${got}`,
      );
    }
  });

  it('refuses an expiry that names no real moment (30 February, 31 April, 29 February 2031, 24:00), saying so', () => {
    for (const expiresAt of [
      '2031-02-30T00:00:00Z',
      '2031-04-31T00:00:00Z',
      '2031-02-29T00:00:00Z',
      '2031-01-01T24:00:00Z',
    ]) {
      expect(problemsOf([{ id: 'key_a', plan: 'free', sha256: HASH_A, expiresAt }])).toBe(
        `keys.json: entry 0: expiresAt is not a real date and time: "${expiresAt}"`,
      );
    }
  });

  it('refuses a previous secret that is not an object with a hash and an expiry', () => {
    const entry = (previous: unknown) => [{ id: 'key_a', plan: 'free', sha256: HASH_A, previous }];
    for (const previous of [null, 'x', [HASH_B]]) {
      expect(problemsOf(entry(previous))).toMatch(/entry 0: previous must be an object \{ sha256, expiresAt \}/);
    }
    for (const sha256 of [undefined, 'abc', HASH_B.toUpperCase(), [HASH_B]]) {
      expect(problemsOf(entry({ sha256, expiresAt: '2031-01-01T00:00:00Z' }))).toMatch(
        /entry 0: previous\.sha256 must be 64 lowercase hex/,
      );
    }
    for (const expiresAt of [undefined, 'soon']) {
      expect(problemsOf(entry({ sha256: HASH_B, expiresAt }))).toMatch(/entry 0: previous\.expiresAt must be/);
    }
    // A good previous secret does not vouch for the rest of the entry.
    const previous = { sha256: HASH_B, expiresAt: '2031-01-01T00:00:00Z' };
    expect(problemsOf([{ id: 'key_a', plan: 'gold', sha256: HASH_A, previous }])).toMatch(
      /entry 0: plan must be one of/,
    );
  });

  it("refuses a previous secret's hash that is another entry's key", () => {
    expect(
      problemsOf([
        { id: 'key_a', plan: 'free', sha256: HASH_A },
        { id: 'key_b', plan: 'pro', sha256: HASH_B, previous: { sha256: HASH_A, expiresAt: '2031-01-01T00:00:00Z' } },
      ]),
    ).toMatch(/duplicate sha256 for id key_b/);
  });

  it('names every problem in one error', () => {
    const message = problemsOf([
      { id: 'key_ok', plan: 'free', sha256: HASH_A },
      { id: 'key_1', plan: 'free', sha256: 'nope' },
      { id: 'key_2', plan: 'platinum', sha256: HASH_B },
      { id: 'key_3', plan: 'enterprise', sha256: hashApiKey('c') },
      { id: 'key_ok', plan: 'pro', sha256: hashApiKey('d') },
      null,
    ]);
    expect(message).toMatch(/^keys\.json: /);
    expect(message).toContain('entry 1: sha256');
    expect(message).toContain('entry 2: plan must be one of');
    expect(message).toContain('entry 3: enterprise keys need limits');
    expect(message).toContain('duplicate id key_ok');
    expect(message).toContain('entry 5 is not an object');
    expect(message).not.toContain('entry 0');
    expect(message).not.toContain('entry 4');
  });

  it('lists the problems in entry order, separated by "; ", and takes entries without an id for no duplicates', () => {
    expect(
      problemsOf([
        { plan: 'free', sha256: HASH_A },
        { plan: 'free', sha256: HASH_B },
      ]),
    ).toBe('keys.json: entry 0: id must be a non-empty string; entry 1: id must be a non-empty string');
  });
});

describe('toKeyRecord', () => {
  it('stamps the load time as createdAt and keeps no prefix', () => {
    const [entry] = parseKeysFile(
      JSON.stringify([{ id: 'key_a', plan: 'business', sha256: HASH_A }]),
      'keys.json',
      DEFAULT_PLANS,
    ).keys;
    const record = toKeyRecord(entry as NonNullable<typeof entry>, new Date('2025-03-04T05:06:07.000Z'));
    expect(record).toStrictEqual({
      id: 'key_a',
      name: 'key_a',
      plan: 'business',
      sha256: HASH_A,
      createdAt: '2025-03-04T05:06:07.000Z',
    });
  });
});

describe('API_KEYS_FILE on disk', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-keys-file-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('appendToKeysFile creates the file, then appends; what it writes parses back', async () => {
    const path = join(dir, 'append.json');
    await appendToKeysFile(path, DEFAULT_PLANS, { id: 'key_a', name: 'A', plan: 'free', sha256: HASH_A });
    await appendToKeysFile(path, DEFAULT_PLANS, {
      id: 'key_b',
      name: 'B',
      plan: 'enterprise',
      limits: { perMinute: 1, perDay: 1 },
      sha256: HASH_B,
    });
    const text = await readFile(path, 'utf8');
    expect(parseKeysFile(text, path, DEFAULT_PLANS).keys).toStrictEqual([
      { id: 'key_a', name: 'A', plan: 'free', sha256: HASH_A },
      { id: 'key_b', name: 'B', plan: 'enterprise', limits: { perMinute: 1, perDay: 1 }, sha256: HASH_B },
    ]);
  });

  it('appendToKeysFile refuses to add to an invalid file and leaves it untouched', async () => {
    const path = join(dir, 'invalid.json');
    const original = JSON.stringify([{ id: 'key_a', plan: 'free', sha256: 'short' }]);
    await writeFile(path, original);
    await expect(
      appendToKeysFile(path, DEFAULT_PLANS, { id: 'key_b', name: 'B', plan: 'free', sha256: HASH_B }),
    ).rejects.toThrow(/sha256/);
    expect(await readFile(path, 'utf8')).toBe(original);
  });

  afterEach(() => {
    vi.useRealTimers();
  });

  const entryA: KeyFileEntry = { id: 'key_a', name: 'A', plan: 'free', sha256: HASH_A };
  const entryB: KeyFileEntry = { id: 'key_b', name: 'B', plan: 'pro', sha256: HASH_B };

  it('writes the file readable by its owner alone, indented, ending in a newline, and leaves no lock behind', async () => {
    const path = join(dir, 'written.json');
    await appendToKeysFile(path, DEFAULT_PLANS, entryA);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(await readFile(path, 'utf8')).toBe(`${JSON.stringify([entryA], null, 2)}\n`);
    expect(existsSync(`${path}.lock`)).toBe(false);
  });

  it('updateKeysFileEntry replaces the entry with that id, keeps the others, and answers the new entry', async () => {
    const path = join(dir, 'update.json');
    await appendToKeysFile(path, DEFAULT_PLANS, entryA);
    await appendToKeysFile(path, DEFAULT_PLANS, entryB);
    const updated = await updateKeysFileEntry(path, DEFAULT_PLANS, 'key_a', (entry) => ({
      ...entry,
      plan: 'business',
    }));
    expect(updated).toStrictEqual({ ...entryA, plan: 'business' });
    expect(parseKeysFile(await readFile(path, 'utf8'), path, DEFAULT_PLANS).keys).toStrictEqual([
      { ...entryA, plan: 'business' },
      entryB,
    ]);
    expect(existsSync(`${path}.lock`)).toBe(false);
  });

  it('updateKeysFileEntry answers null for an id the file does not have and leaves the file as it was', async () => {
    const path = join(dir, 'update-unknown.json');
    await appendToKeysFile(path, DEFAULT_PLANS, entryA);
    const before = await readFile(path, 'utf8');
    expect(await updateKeysFileEntry(path, DEFAULT_PLANS, 'key_nope', (entry) => entry)).toBeNull();
    expect(await readFile(path, 'utf8')).toBe(before);
    expect(existsSync(`${path}.lock`)).toBe(false);
  });

  it('keeps every entry of writers appending at once: they take turns', async () => {
    const path = join(dir, 'concurrent.json');
    const entries = Array.from({ length: 10 }, (_, i) => ({
      id: `key_${i}`,
      name: `writer ${i}`,
      plan: 'free' as const,
      sha256: hashApiKey(`writer ${i}`),
    }));
    await Promise.all(entries.map((entry) => appendToKeysFile(path, DEFAULT_PLANS, entry)));
    const written = parseKeysFile(await readFile(path, 'utf8'), path, DEFAULT_PLANS).keys;
    expect(written.map((e) => e.id).sort()).toEqual(entries.map((e) => e.id).sort());
  });

  it('takes over a lock left more than 30 s ago by a writer that died', async () => {
    const path = join(dir, 'stale-lock.json');
    await writeFile(`${path}.lock`, '');
    const long = new Date(Date.now() - 60_000);
    await utimes(`${path}.lock`, long, long);
    await appendToKeysFile(path, DEFAULT_PLANS, entryA);
    expect(parseKeysFile(await readFile(path, 'utf8'), path, DEFAULT_PLANS).keys).toStrictEqual([entryA]);
    expect(existsSync(`${path}.lock`)).toBe(false);
  });

  it('gives up after 10 s on a lock another writer holds, naming it and writing nothing', async () => {
    const path = join(dir, 'held-lock.json');
    await appendToKeysFile(path, DEFAULT_PLANS, entryA);
    const before = await readFile(path, 'utf8');
    await writeFile(`${path}.lock`, '');
    // The clock the writer reads jumps past its 10 s wait; the lock is still fresh (under 30 s).
    vi.useFakeTimers({ toFake: ['Date'] });
    const append = appendToKeysFile(path, DEFAULT_PLANS, entryB);
    vi.setSystemTime(Date.now() + 11_000);
    await expect(append).rejects.toThrow(`${path}.lock is held by another writer`);
    expect(await readFile(path, 'utf8')).toBe(before);
    expect(existsSync(`${path}.lock`)).toBe(true);
  });

  it('fails at once when the directory of the file does not exist', async () => {
    await expect(appendToKeysFile(join(dir, 'missing-dir', 'keys.json'), DEFAULT_PLANS, entryA)).rejects.toThrow(
      /ENOENT/,
    );
  });
});
