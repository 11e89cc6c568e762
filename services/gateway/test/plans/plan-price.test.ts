import { describe, expect, it } from 'vitest';
import type { PlanBook } from '../../src/plans/plans.js';
import { parsePlansFile } from '../../src/plans/plans-file.js';

// A plan's price in PLANS_FILE: integer minor units of an ISO 4217 currency, each problem named.

const SOURCE = 'PLANS_FILE=plans.json';
const PRICE = { currency: 'EUR', base: 4900, includedUnits: 100_000, unitPrice: 50, per: 1000 };

function read(price: unknown): PlanBook | string[] {
  return parsePlansFile(JSON.stringify({ plans: { pro: { windows: { minute: 300 }, price } } }), SOURCE, false);
}

function problems(price: unknown): string[] {
  const parsed = read(price);
  if (!Array.isArray(parsed)) throw new Error('expected problems, got plans');
  return parsed.map((p) => p.replace(`${SOURCE}: `, ''));
}

describe('a plan’s price in PLANS_FILE', () => {
  it('is taken as written, and a plan without one has none', () => {
    const book = read(PRICE);
    if (Array.isArray(book)) throw new Error(book.join('\n'));
    expect(book.plans.get('pro')?.price).toEqual(PRICE);
    const unpriced = parsePlansFile(JSON.stringify({ plans: { free: { windows: { minute: 60 } } } }), SOURCE, false);
    if (Array.isArray(unpriced)) throw new Error(unpriced.join('\n'));
    expect(unpriced.plans.get('free')?.price).toBeUndefined();
  });

  it('takes zeroes (a free base, nothing included, a free overage) and amounts beyond 2^31', () => {
    const book = read({ currency: 'JPY', base: 0, includedUnits: 0, unitPrice: 0, per: 1 });
    expect(Array.isArray(book)).toBe(false);
    const big = read({ ...PRICE, base: 2 ** 40, includedUnits: Number.MAX_SAFE_INTEGER });
    expect(Array.isArray(big)).toBe(false);
  });

  it.each([
    ['lower-case', 'eur', 'plans.pro.price.currency must be an ISO 4217 code of three capital letters, such as "EUR"'],
    ['a symbol', '€', 'plans.pro.price.currency must be an ISO 4217 code of three capital letters, such as "EUR"'],
    [
      'four letters',
      'EURO',
      'plans.pro.price.currency must be an ISO 4217 code of three capital letters, such as "EUR"',
    ],
    ['no code of ISO 4217', 'EUO', 'plans.pro.price.currency "EUO" is not an ISO 4217 currency'],
    ['missing', undefined, 'plans.pro.price.currency must be an ISO 4217 code of three capital letters, such as "EUR"'],
    // A list whose text is a code: not a string, so not a code.
    ['a list', ['EUR'], 'plans.pro.price.currency must be an ISO 4217 code of three capital letters, such as "EUR"'],
  ])('refuses a currency that is %s', (_case, currency, message) => {
    expect(problems({ ...PRICE, currency })).toEqual([message]);
  });

  it.each(['base', 'includedUnits', 'unitPrice'] as const)(
    'refuses a %s that is negative, a fraction, text, unsafe or missing',
    (field) => {
      for (const value of [-1, 49.5, '4900', 2 ** 53, undefined]) {
        expect(problems({ ...PRICE, [field]: value })).toEqual([
          `plans.pro.price.${field} must be a whole number from 0 (integer minor units or units, no fractions)`,
        ]);
      }
    },
  );

  it('refuses a per below 1', () => {
    for (const per of [0, -1000, 0.5, '1000']) {
      expect(problems({ ...PRICE, per })).toEqual(['plans.pro.price.per must be a whole number from 1']);
    }
  });

  it('lists every problem of a price at once, an unknown field and a price that is no object among them', () => {
    expect(problems({ ...PRICE, currency: 'eur', per: 0, vat: 20 })).toEqual([
      'plans.pro.price: unknown field "vat" (currency, base, includedUnits, unitPrice, per)',
      'plans.pro.price.currency must be an ISO 4217 code of three capital letters, such as "EUR"',
      'plans.pro.price.per must be a whole number from 1',
    ]);
    for (const price of [4900, [PRICE], null]) {
      expect(problems(price)).toEqual([
        'plans.pro.price must be an object { currency, base, includedUnits, unitPrice, per }',
      ]);
    }
    // An unknown field's name is cut to 40 characters.
    expect(problems({ ...PRICE, [`v${'a'.repeat(59)}`]: 1 })).toEqual([
      `plans.pro.price: unknown field "v${'a'.repeat(39)}" (currency, base, includedUnits, unitPrice, per)`,
    ]);
  });
});
