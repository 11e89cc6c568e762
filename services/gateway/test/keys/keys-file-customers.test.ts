import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../src/keys/api-key.js';
import {
  appendCustomerToKeysFile,
  appendToKeysFile,
  keysFileContents,
  parseKeysFile,
} from '../../src/keys/keys-file.js';
import { DEFAULT_PLANS } from '../../src/plans/plans.js';

/* An API_KEYS_FILE with customers: `{ "keys": [...], "customers": [...] }` beside the bare array. */

const key = (id: string, extra: object = {}) => ({ id, name: id, plan: 'pro', sha256: hashApiKey(id), ...extra });
const ACME = { id: 'cus_acme', name: 'Acme', plan: 'pro', limits: { perMinute: 100 } };

function problems(data: unknown): string[] {
  const contents = keysFileContents(JSON.stringify(data), 'keys.json', DEFAULT_PLANS);
  return 'problems' in contents ? contents.problems : [];
}

describe('a keys file with customers', () => {
  it('reads keys and customers, the zone in its right case, unknown fields dropped', () => {
    const file = parseKeysFile(
      JSON.stringify({
        keys: [key('key_a', { customerId: 'cus_acme' }), key('key_b', { plan: 'free' })],
        customers: [
          {
            ...ACME,
            billing: { anchorDay: 15, timeZone: 'europe/paris' },
            externalId: 'ext-1',
            metadata: { crm: '7' },
            note: 'x',
          },
        ],
      }),
      'keys.json',
      DEFAULT_PLANS,
    );
    expect(file.keys.map((k) => [k.id, k.customerId])).toEqual([
      ['key_a', 'cus_acme'],
      ['key_b', undefined],
    ]);
    expect(file.customers).toStrictEqual([
      { ...ACME, billing: { anchorDay: 15, timeZone: 'Europe/Paris' }, externalId: 'ext-1', metadata: { crm: '7' } },
    ]);
  });

  it('reads an old file, a bare array of keys, as keys without customers', () => {
    expect(parseKeysFile(JSON.stringify([key('key_a')]), 'keys.json', DEFAULT_PLANS).customers).toEqual([]);
  });

  it('refuses keys that name a customer it lacks or break its rules, listing every problem', () => {
    const found = problems({
      keys: [
        key('key_a', { customerId: 'cus_gone' }),
        key('key_b', { customerId: 'cus_acme', plan: 'free' }),
        key('key_c', { customerId: 'cus_acme', limits: { perMinute: 500 } }),
        key('key_d', { customerId: 'cus_other' }),
      ],
      customers: [ACME],
    });
    expect(found).toEqual([
      "keys.json: entry 0 (key_a): customerId cus_gone is not among the file's customers",
      expect.stringMatching(/^keys\.json: entry 1 \(key_b\): plan: keys of customer cus_acme are on its plan \(pro\)/),
      expect.stringMatching(
        /^keys\.json: entry 2 \(key_c\): limits\.perMinute \(500\) cannot exceed customer cus_acme's 100/,
      ),
      "keys.json: entry 3 (key_d): customerId cus_other is not among the file's customers",
    ]);
  });

  it('refuses bad customers, each problem naming its entry, duplicates included', () => {
    const found = problems({
      keys: [],
      customers: [
        null,
        { id: '', name: 'x', plan: 'pro' },
        { id: 'cus_b', name: 'B\u001b[2J', plan: 'pro' },
        { id: 'cus_c', name: 'C', plan: 'gold' },
        { id: 'cus_d', name: 'D', plan: 'pro', billing: { anchorDay: 31 } },
        { id: 'cus_e', name: 'E', plan: 'pro', billing: { timeZone: 'Mars/Olympus' } },
        { id: 'cus_f', name: 'F', plan: 'pro', externalId: 'has space' },
        { id: 'cus_g', name: 'G', plan: 'pro', metadata: { 'bad name': 'x' } },
        { id: 'cus_h', name: 'H', plan: 'pro', externalId: 'same' },
        { id: 'cus_h', name: 'H2', plan: 'pro', externalId: 'same' },
      ],
    });
    for (const [index, what] of [
      [0, 'is not an object'],
      [1, 'id must be'],
      [2, 'name must be plain text'],
      [3, 'plan must be one of'],
      [4, 'anchorDay'],
      [5, 'timeZone'],
      [6, 'externalId'],
      [7, 'metadata name'],
    ] as const) {
      expect(
        found.some((p) => p.startsWith(`keys.json: customer ${index}`) && p.includes(what)),
        `${index} ${what}`,
      ).toBe(true);
    }
    expect(found).toContain('keys.json: duplicate customer id cus_h');
    expect(found).toContain('keys.json: duplicate customer externalId same');
  });
});

describe('credit terms in a keys file', () => {
  it('keeps a lone key’s and a customer’s terms (null too), and lists bad ones with the other problems', () => {
    const file = parseKeysFile(
      JSON.stringify({
        keys: [key('key_a', { credits: { refill: { amount: 5, every: 'day' } } }), key('key_b', { credits: null })],
        customers: [{ ...ACME, credits: {} }],
      }),
      'keys.json',
      DEFAULT_PLANS,
    );
    expect(file.keys.map((k) => k.credits)).toEqual([{ refill: { amount: 5, every: 'day' } }, null]);
    expect(file.customers[0]?.credits).toEqual({});
    expect(
      problems({
        keys: [
          key('key_a', { credits: { refill: { amount: 5 } } }),
          key('key_b', { customerId: 'cus_acme', credits: {} }),
          key('key_c', { plan: 'gold' }),
        ],
        customers: [{ ...ACME, credits: { refill: { amount: -1, every: 'day' } } }],
      }),
    ).toEqual([
      "keys.json: entry 0: credits.refill.every must be 'period' or 'day'",
      "keys.json: entry 1: credits: a key of a customer spends its customer's credits; give them to customer cus_acme",
      expect.stringContaining('keys.json: entry 2:'),
      'keys.json: customer 0: credits.refill.amount must be a whole number from 1 to 1000000000000',
    ]);
  });
});

describe('writing a keys file with customers', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'keys-file-customers-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('keeps a bare array a bare array until a customer is added, then writes { keys, customers }', async () => {
    const path = join(dir, 'grow.json');
    await writeFile(path, JSON.stringify([key('key_a')]));
    await appendToKeysFile(path, DEFAULT_PLANS, key('key_b'));
    expect(Array.isArray(JSON.parse(await readFile(path, 'utf8')))).toBe(true);
    await appendCustomerToKeysFile(path, DEFAULT_PLANS, ACME);
    await appendToKeysFile(path, DEFAULT_PLANS, key('key_c', { customerId: 'cus_acme' }));
    const written = JSON.parse(await readFile(path, 'utf8'));
    expect(written.keys.map((k: { id: string }) => k.id)).toEqual(['key_a', 'key_b', 'key_c']);
    expect(written.customers).toEqual([ACME]);
  });

  it('writes nothing the gateway would refuse: a key of an unknown customer, a duplicate customer', async () => {
    const path = join(dir, 'refuse.json');
    await appendCustomerToKeysFile(path, DEFAULT_PLANS, ACME);
    const before = await readFile(path, 'utf8');
    await expect(appendToKeysFile(path, DEFAULT_PLANS, key('key_x', { customerId: 'cus_nope' }))).rejects.toThrow(
      /cus_nope is not among the file's customers/,
    );
    await expect(appendCustomerToKeysFile(path, DEFAULT_PLANS, ACME)).rejects.toThrow(/duplicate customer id cus_acme/);
    expect(await readFile(path, 'utf8')).toBe(before);
  });
});

describe("a keys file's customer, field by field at its bounds", () => {
  const one = (entry: unknown) => problems({ keys: [], customers: [entry] });
  const at = (message: string) => [`keys.json: customer 0${message}`];
  const x = (n: number, c = 'x') => c.repeat(n);
  const labels = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`l${i}`, 'v']));

  it.each([
    ['an id of 64 characters', { id: x(64) }],
    ['a name of 100 characters', { name: x(100) }],
    ['an externalId of 128 visible characters, ! and ~ included', { externalId: `!${x(126)}~` }],
    ['no credits (null)', { credits: null }],
    ['50 metadata labels', { metadata: labels(50) }],
    ['a metadata name of 40 of its characters', { metadata: { [`Az09_.:-${x(32)}`]: 'v' } }],
    ['a metadata value of 500 characters', { metadata: { n: x(500) } }],
  ])('takes %s', (_case, fields) => {
    expect(one({ ...ACME, ...fields })).toEqual([]);
  });

  it.each([
    ['an array', [], ' is not an object'],
    ['a string', 'cus_acme', ' is not an object'],
    ['a numeric id', { id: 5 }, ': id must be 1–64 characters'],
    ['an empty id', { id: '' }, ': id must be 1–64 characters'],
    ['an id of 65 characters', { id: x(65) }, ': id must be 1–64 characters'],
    ['a numeric name', { name: 5 }, ': name must be plain text of 1–100 characters'],
    ['an empty name', { name: '' }, ': name must be plain text of 1–100 characters'],
    ['a name of 101 characters', { name: x(101) }, ': name must be plain text of 1–100 characters'],
    ['a bell in the name', { name: 'A\u0007' }, ': name must be plain text of 1–100 characters'],
    ['billing as null', { billing: null }, ': billing must be { anchorDay, timeZone }'],
    ['billing as a string', { billing: 'monthly' }, ': billing must be { anchorDay, timeZone }'],
    [
      'anchor day 29',
      { billing: { anchorDay: 29 } },
      ': billing.anchorDay must be a whole number from 1 to 28 (every month has those days)',
    ],
    ['a numeric externalId', { externalId: 5 }, ': externalId must be 1–128 visible ASCII characters'],
    ['an empty externalId', { externalId: '' }, ': externalId must be 1–128 visible ASCII characters'],
    ['an externalId of 129', { externalId: x(129) }, ': externalId must be 1–128 visible ASCII characters'],
    ['a space inside externalId', { externalId: 'a b' }, ': externalId must be 1–128 visible ASCII characters'],
    ['a DEL ending externalId', { externalId: 'ab\u007f' }, ': externalId must be 1–128 visible ASCII characters'],
    ['credits as a string', { credits: 'lots' }, ': credits must be an object'],
    ['metadata as null', { metadata: null }, ': metadata must be an object of strings'],
    ['metadata as an array', { metadata: ['a'] }, ': metadata must be an object of strings'],
    ['metadata as a string', { metadata: 'a' }, ': metadata must be an object of strings'],
    ['51 metadata labels', { metadata: labels(51) }, ': metadata holds at most 50 labels'],
    ['an empty metadata name', { metadata: { '': 'v' } }, ': metadata name "" must be 1–40 of A-Z a-z 0-9 _ . : -'],
    [
      'a metadata name of 41',
      { metadata: { [x(41)]: 'v' } },
      `: metadata name "${x(41)}" must be 1–40 of A-Z a-z 0-9 _ . : -`,
    ],
    [
      'a long metadata name, shown cut',
      { metadata: { [x(60)]: 'v' } },
      `: metadata name "${x(50)}" must be 1–40 of A-Z a-z 0-9 _ . : -`,
    ],
    [
      'a space in a metadata name',
      { metadata: { 'a b': 'v' } },
      ': metadata name "a b" must be 1–40 of A-Z a-z 0-9 _ . : -',
    ],
    ['a numeric metadata value', { metadata: { n: 5 } }, ': metadata.n must be plain text of up to 500 characters'],
    ['a metadata value of 501', { metadata: { n: x(501) } }, ': metadata.n must be plain text of up to 500 characters'],
    [
      'a bell in a metadata value',
      { metadata: { n: 'a\u0007' } },
      ': metadata.n must be plain text of up to 500 characters',
    ],
  ])('refuses %s, in words naming the entry', (_case, entry, message) => {
    expect(one(Array.isArray(entry) || typeof entry !== 'object' ? entry : { ...ACME, ...entry })).toEqual(at(message));
  });

  it('refuses customers that are not an array, and counts no duplicate among ids and externalIds that are not text', () => {
    expect(problems({ keys: [], customers: { cus_acme: ACME } })).toEqual(['keys.json: customers must be an array']);
    expect(
      problems({
        keys: [],
        customers: [
          { ...ACME, id: 7 },
          { ...ACME, id: 7, externalId: 'e' },
        ],
      }),
    ).toEqual([
      'keys.json: customer 0: id must be 1–64 characters',
      'keys.json: customer 1: id must be 1–64 characters',
    ]);
    expect(
      problems({
        keys: [],
        customers: [
          { ...ACME, externalId: 7 },
          { ...ACME, id: 'cus_two', externalId: 7 },
        ],
      }),
    ).toEqual([
      'keys.json: customer 0: externalId must be 1–128 visible ASCII characters',
      'keys.json: customer 1: externalId must be 1–128 visible ASCII characters',
    ]);
  });

  it('keeps what it read: billing filled from the defaults, credit terms as stored, copies of limits and labels', () => {
    const entries = [
      {
        ...ACME,
        id: 'cus_zone',
        billing: { timeZone: 'europe/paris' },
        credits: { refill: { amount: 5, every: 'day', x: 1 } },
      },
      { ...ACME, id: 'cus_day', billing: { anchorDay: 15 }, credits: null, metadata: { crm: '7' } },
      { id: 'cus_bare', name: 'Bare', plan: 'free' },
    ];
    const read = parseKeysFile(JSON.stringify({ keys: [], customers: entries }), 'keys.json', DEFAULT_PLANS);
    expect(read.customers).toStrictEqual([
      {
        ...ACME,
        id: 'cus_zone',
        billing: { anchorDay: 1, timeZone: 'Europe/Paris' },
        credits: { refill: { amount: 5, every: 'day' } },
      },
      { ...ACME, id: 'cus_day', billing: { anchorDay: 15, timeZone: 'UTC' }, credits: null, metadata: { crm: '7' } },
      { id: 'cus_bare', name: 'Bare', plan: 'free' },
    ]);
  });
});
