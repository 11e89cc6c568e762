import { describe, expect, it } from 'vitest';
import { entryBefore, openingEntry } from '../../src/credits/credit-ledger.js';
import {
  type CreditRule,
  creditTermsProblem,
  MAX_CREDITS,
  refillDue,
  refillPeriod,
  storedCreditTerms,
} from '../../src/credits/credit-terms.js';
import { calendarFor, UTC_CALENDAR } from '../../src/limits/calendar.js';

/*
 * Credit terms as the files (PLANS_FILE, API_KEYS_FILE, CUSTOMERS_FILE) and the admin API's
 * operations check them: no schema stands before the files, so each refusal is the one an operator
 * reads. Then the refill period a rule gives, and when a balance is due its refill.
 */

const at = (iso: string) => Date.parse(iso);

describe('creditTermsProblem', () => {
  it.each([
    ['a string', 'plenty', 'credits must be an object'],
    ['a number', 5, 'credits must be an object'],
    ['null', null, 'credits must be an object'],
    ['an array', [], 'credits must be an object'],
    [
      'a field it does not know',
      { refill: { amount: 1, every: 'day' }, rollover: true },
      'credits.rollover is not a field of credits (refill)',
    ],
    ['a refill that is a number', { refill: 5 }, 'credits.refill must be { amount, every }'],
    ['a refill of null', { refill: null }, 'credits.refill must be { amount, every }'],
    [
      'no amount',
      { refill: { every: 'day' } },
      `credits.refill.amount must be a whole number from 1 to ${MAX_CREDITS}`,
    ],
    ['an amount of 0', { refill: { amount: 0, every: 'day' } }, 'credits.refill.amount must be a whole number from 1'],
    ['a negative amount', { refill: { amount: -1, every: 'day' } }, 'credits.refill.amount must be a whole number'],
    ['a fraction', { refill: { amount: 1.5, every: 'day' } }, 'credits.refill.amount must be a whole number'],
    ['an amount as text', { refill: { amount: '3', every: 'day' } }, 'credits.refill.amount must be a whole number'],
    ['one over the most', { refill: { amount: MAX_CREDITS + 1, every: 'day' } }, 'credits.refill.amount must be'],
    ['an unknown every', { refill: { amount: 3, every: 'week' } }, "credits.refill.every must be 'period' or 'day'"],
    ['no every', { refill: { amount: 3 } }, "credits.refill.every must be 'period' or 'day'"],
  ])('refuses %s, saying what is wrong', (_label, terms, message) => {
    expect(creditTermsProblem(terms)).toContain(message);
  });

  it.each([
    ['no refill', {}],
    ['a refill of 1 a day', { refill: { amount: 1, every: 'day' } }],
    ['the most each period', { refill: { amount: MAX_CREDITS, every: 'period' } }],
  ])('takes %s', (_label, terms) => {
    expect(creditTermsProblem(terms)).toBeUndefined();
  });

  it('names where the terms are, as the caller says', () => {
    expect(creditTermsProblem({ refill: { amount: 0, every: 'day' } }, 'plans.pro.credits')).toBe(
      `plans.pro.credits.refill.amount must be a whole number from 1 to ${MAX_CREDITS}`,
    );
    expect(creditTermsProblem('x', 'entry 3: credits')).toBe('entry 3: credits must be an object');
  });
});

describe('storedCreditTerms', () => {
  it('keeps only the fields checked: a refill’s amount and every, or nothing', () => {
    const given = { refill: { amount: 4, every: 'day', note: 'x' }, extra: 1 };
    expect(storedCreditTerms(given as never)).toEqual({ refill: { amount: 4, every: 'day' } });
    expect(storedCreditTerms({ extra: 1 } as never)).toEqual({});
  });
});

describe('refillPeriod', () => {
  const paris = calendarFor({ anchorDay: 15, timeZone: 'Europe/Paris' });
  it('is none without a refill', () => {
    expect(refillPeriod({ refill: null, calendar: UTC_CALENDAR }, at('2026-11-20T10:00:00Z'))).toBeNull();
  });

  it('is the billing period from the anchor day in its zone for `period`, named by its start', () => {
    const rule: CreditRule = { refill: { amount: 5, every: 'period' }, calendar: paris };
    const start = at('2026-11-14T23:00:00Z');
    expect(refillPeriod(rule, at('2026-11-20T10:00:00Z'))).toEqual({
      name: `period:${start}`,
      start,
      nextAt: at('2026-12-14T23:00:00Z'),
    });
  });

  it('is the local day for `day`, named by its start', () => {
    const rule: CreditRule = { refill: { amount: 5, every: 'day' }, calendar: paris };
    const start = at('2026-11-19T23:00:00Z');
    expect(refillPeriod(rule, at('2026-11-20T10:00:00Z'))).toEqual({
      name: `day:${start}`,
      start,
      nextAt: at('2026-11-20T23:00:00Z'),
    });
  });
});

describe('refillDue', () => {
  it('is due for a balance never refilled, even for a period starting at 0 or before', () => {
    expect(refillDue('', { start: 1000 })).toBe(true);
    expect(refillDue('', { start: 0 })).toBe(true);
    expect(refillDue('', { start: -86_400_000 })).toBe(true);
  });

  it('is due only for a period starting after the one last refilled, whatever its name', () => {
    expect(refillDue('period:1000', { start: 1000 })).toBe(false);
    expect(refillDue('period:1000', { start: 999 })).toBe(false);
    expect(refillDue('period:1000', { start: 1001 })).toBe(true);
    expect(refillDue('day:1000', { start: 1000 })).toBe(false);
    expect(refillDue('day:-5000', { start: -5000 })).toBe(false);
    expect(refillDue('day:-5000', { start: -4999 })).toBe(true);
  });

  it('is due when the last name carries no start it can read', () => {
    expect(refillDue('period:soon', { start: 1 })).toBe(true);
  });
});

describe('ledger entry ids', () => {
  it('orders `<ms>-<sequence>` ids as numbers, the millisecond first', () => {
    expect(entryBefore('9-0', '10-0')).toBe(true);
    expect(entryBefore('10-0', '9-0')).toBe(false);
    expect(entryBefore('10-2', '10-10')).toBe(true);
    expect(entryBefore('10-10', '10-2')).toBe(false);
    expect(entryBefore('10-3', '10-3')).toBe(false);
    expect(entryBefore('9-5', '10-1')).toBe(true);
    expect(entryBefore('11-1', '10-5')).toBe(false);
  });

  it('shows an opening at its id’s millisecond', () => {
    expect(openingEntry('1764000000000-7', 42)).toEqual({
      id: '1764000000000-7',
      type: 'opening',
      amount: 42,
      at: 1764000000000,
    });
  });
});
