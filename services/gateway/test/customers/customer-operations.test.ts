import { describe, expect, it } from 'vitest';
import { PLAN_CREDITS } from '../../src/credits/credit-terms.js';
import { CustomerRuleError, checkNewCustomer, customerChanges } from '../../src/customers/customer-operations.js';
import type { CustomerRecord } from '../../src/customers/customer-store.js';
import { DEFAULT_PLANS } from '../../src/plans/plans.js';

/*
 * The customer rules every caller shares. The admin API's schema refuses malformed credit terms
 * before these run; the CLI's file backend has no schema, so the rules themselves must refuse them.
 */

const NOW = Date.parse('2026-11-26T10:00:00.000Z');
const REFILL = { refill: { amount: 500, every: 'period' as const } };
const BAD_TERMS: Array<[string, unknown, string]> = [
  ['an amount of 0', { refill: { amount: 0, every: 'period' } }, 'credits.refill.amount'],
  ['a fractional amount', { refill: { amount: 1.5, every: 'day' } }, 'credits.refill.amount'],
  ['a refill every week', { refill: { amount: 5, every: 'week' } }, 'credits.refill.every'],
  ['a field beside refill', { refill: REFILL.refill, bonus: 5 }, 'credits.bonus'],
];

const current = (): CustomerRecord =>
  checkNewCustomer(DEFAULT_PLANS, { name: 'Acme', plan: 'pro', credits: REFILL }, NOW) as CustomerRecord;

describe('credit terms in the customer rules', () => {
  it('keeps the terms a new customer is given, and none when it is given none', () => {
    expect(current().credits).toEqual(REFILL);
    expect(checkNewCustomer(DEFAULT_PLANS, { name: 'Plain', plan: 'pro' }, NOW)).not.toHaveProperty('credits');
  });

  it.each(BAD_TERMS)('refuses a new customer with %s, naming the field', (_case, credits, field) => {
    const request = { name: 'Acme', plan: 'pro', credits: credits as never };
    expect(() => checkNewCustomer(DEFAULT_PLANS, request, NOW)).toThrow(CustomerRuleError);
    expect(() => checkNewCustomer(DEFAULT_PLANS, request, NOW)).toThrow(field);
  });

  it.each(BAD_TERMS)('refuses a change to %s, naming the field', (_case, credits, field) => {
    expect(() => customerChanges(DEFAULT_PLANS, current(), { credits: credits as never })).toThrow(CustomerRuleError);
    expect(() => customerChanges(DEFAULT_PLANS, current(), { credits: credits as never })).toThrow(field);
  });

  it("changes the terms only when asked: new ones, none (null), or its plan's ('plan')", () => {
    const day = { refill: { amount: 20, every: 'day' as const } };
    expect(customerChanges(DEFAULT_PLANS, current(), { credits: day })).toEqual({ credits: day });
    expect(customerChanges(DEFAULT_PLANS, current(), { credits: null })).toEqual({ credits: null });
    expect(customerChanges(DEFAULT_PLANS, current(), { credits: PLAN_CREDITS })).toEqual({ credits: PLAN_CREDITS });
    expect(customerChanges(DEFAULT_PLANS, current(), { name: 'Acme Ltd' })).toEqual({ name: 'Acme Ltd' });
  });
});
