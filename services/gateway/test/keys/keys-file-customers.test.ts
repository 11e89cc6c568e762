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
