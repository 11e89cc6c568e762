import { describe, expect, it } from 'vitest';
import { PLAN_CREDITS } from '../../src/credits/credit-terms.js';
import { CustomerRuleError, checkNewCustomer, customerChanges } from '../../src/customers/customer-operations.js';
import type { CustomerRecord } from '../../src/customers/customer-store.js';
import { KeyOwnershipError, keyOwnership } from '../../src/customers/key-ownership.js';
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
    expect(customerChanges(DEFAULT_PLANS, current(), { credits: day })).toStrictEqual({ credits: day });
    expect(customerChanges(DEFAULT_PLANS, current(), { credits: null })).toStrictEqual({ credits: null });
    expect(customerChanges(DEFAULT_PLANS, current(), { credits: PLAN_CREDITS })).toStrictEqual({
      credits: PLAN_CREDITS,
    });
    expect(customerChanges(DEFAULT_PLANS, current(), { name: 'Acme Ltd' })).toStrictEqual({ name: 'Acme Ltd' });
  });
});

describe('a new customer in the customer rules', () => {
  it('is made as asked, created now, on UTC from day 1 when given no billing, leaving out what it was not given', () => {
    const made = checkNewCustomer(
      DEFAULT_PLANS,
      { name: 'Acme', plan: 'pro', limits: { perMinute: 100 }, externalId: 'crm-1', metadata: { a: 'b' } },
      NOW,
    );
    expect(made).toEqual({
      id: expect.stringMatching(/^cus_/),
      name: 'Acme',
      plan: 'pro',
      limits: { perMinute: 100 },
      billing: { anchorDay: 1, timeZone: 'UTC' },
      externalId: 'crm-1',
      metadata: { a: 'b' },
      createdAt: '2026-11-26T10:00:00.000Z',
    });
    expect(Object.keys(checkNewCustomer(DEFAULT_PLANS, { name: 'Plain', plan: 'pro' }, NOW)).sort()).toEqual([
      'billing',
      'createdAt',
      'id',
      'name',
      'plan',
    ]);
  });

  it('fills the billing settings not given from the defaults, under the zone’s own name', () => {
    const billing = (given: object) =>
      checkNewCustomer(DEFAULT_PLANS, { name: 'A', plan: 'pro', billing: given }, NOW).billing;
    expect(billing({ anchorDay: 15 })).toEqual({ anchorDay: 15, timeZone: 'UTC' });
    expect(billing({ timeZone: 'europe/paris' })).toEqual({ anchorDay: 1, timeZone: 'Europe/Paris' });
  });

  it.each([
    ['an unknown plan', { name: 'A', plan: 'platinum' }, 'plan'],
    ['anchor day 29', { name: 'A', plan: 'pro', billing: { anchorDay: 29 } }, 'billing.anchorDay'],
  ])('refuses %s as a rule error naming the field', (_case, request, field) => {
    expect(() => checkNewCustomer(DEFAULT_PLANS, request as never, NOW)).toThrow(CustomerRuleError);
    expect(() => checkNewCustomer(DEFAULT_PLANS, request as never, NOW)).toThrow(field);
  });
});

describe('a change in the customer rules', () => {
  const own = (): CustomerRecord =>
    checkNewCustomer(
      DEFAULT_PLANS,
      { name: 'Acme', plan: 'pro', limits: { perMinute: 100 }, billing: { anchorDay: 15, timeZone: 'Europe/Paris' } },
      NOW,
    );
  const plain = (): CustomerRecord => checkNewCustomer(DEFAULT_PLANS, { name: 'Plain', plan: 'pro' }, NOW);

  it('changes its own limits only when given or dropped, or on a move to a plan with windows', () => {
    expect(customerChanges(DEFAULT_PLANS, own(), { limits: { perMinute: 50 } })).toStrictEqual({
      limits: { perMinute: 50 },
    });
    expect(customerChanges(DEFAULT_PLANS, own(), { limits: null })).toStrictEqual({ limits: null });
    // None to drop: no change.
    expect(customerChanges(DEFAULT_PLANS, plain(), { limits: null })).toStrictEqual({});
    expect(customerChanges(DEFAULT_PLANS, own(), { plan: 'business' })).toStrictEqual({
      plan: 'business',
      limits: null,
    });
    expect(customerChanges(DEFAULT_PLANS, own(), { plan: 'pro' })).toStrictEqual({ plan: 'pro' });
    // Enterprise has no windows of its own: the customer keeps what it was sold.
    expect(customerChanges(DEFAULT_PLANS, own(), { plan: 'enterprise' })).toStrictEqual({ plan: 'enterprise' });
  });

  it('keeps the billing setting not named, from the customer as it stands', () => {
    expect(customerChanges(DEFAULT_PLANS, own(), { billing: { timeZone: 'america/new_york' } })).toStrictEqual({
      billing: { anchorDay: 15, timeZone: 'America/New_York' },
    });
    expect(customerChanges(DEFAULT_PLANS, own(), { billing: { anchorDay: 3 } })).toStrictEqual({
      billing: { anchorDay: 3, timeZone: 'Europe/Paris' },
    });
  });

  // A field it does not change is absent, not undefined: the change names only what it changes.
  it('names only what it changes', () => {
    expect(Object.keys(customerChanges(DEFAULT_PLANS, own(), { metadata: { a: 'b' } }))).toEqual(['metadata']);
    expect(Object.keys(customerChanges(DEFAULT_PLANS, own(), { name: 'B', externalId: 'x' })).sort()).toEqual([
      'externalId',
      'name',
    ]);
  });

  it('passes externalId and metadata on, set or removed (null)', () => {
    expect(customerChanges(DEFAULT_PLANS, own(), { externalId: 'crm-2', metadata: { a: 'b' } })).toStrictEqual({
      externalId: 'crm-2',
      metadata: { a: 'b' },
    });
    expect(customerChanges(DEFAULT_PLANS, own(), { externalId: null, metadata: null })).toStrictEqual({
      externalId: null,
      metadata: null,
    });
  });

  it.each([
    ['an unknown plan', { plan: 'platinum' }, 'plan'],
    ['enterprise with its own limits dropped', { plan: 'enterprise', limits: null }, 'limits'],
    ['anchor day 0', { billing: { anchorDay: 0 } }, 'billing.anchorDay'],
    ['an offset for a zone', { billing: { timeZone: '+05:00' } }, 'billing.timeZone'],
  ])('refuses %s as a rule error naming the field', (_case, update, field) => {
    expect(() => customerChanges(DEFAULT_PLANS, own(), update as never)).toThrow(CustomerRuleError);
    expect(() => customerChanges(DEFAULT_PLANS, own(), update as never)).toThrow(field);
  });
});

describe('which customer a key belongs to, and so its plan (keyOwnership)', () => {
  const acme = {
    ...checkNewCustomer(DEFAULT_PLANS, { name: 'Acme', plan: 'business', limits: { perMinute: 300 } }, NOW),
    id: 'cus_acme',
  };
  const customers = { get: async (id: string) => (id === acme.id ? structuredClone(acme) : null) };
  const own = (current: Parameters<typeof keyOwnership>[2], request: Parameters<typeof keyOwnership>[3]) =>
    keyOwnership(DEFAULT_PLANS, customers, current, request);

  it("puts a key of a customer on the customer's plan, and a lone key on the plan asked or the one it has", async () => {
    expect(await own(null, { customerId: 'cus_acme' })).toEqual({ plan: 'business', customerId: 'cus_acme' });
    expect(await own({ plan: 'free', customerId: 'cus_acme' }, {})).toEqual({
      plan: 'business',
      customerId: 'cus_acme',
    });
    expect(await own(null, { plan: 'pro' })).toEqual({ plan: 'pro', customerId: undefined });
    expect(await own({ plan: 'free' }, {})).toEqual({ plan: 'free', customerId: undefined });
    // Leaving its customer: on the plan asked, or the one it has.
    expect(await own({ plan: 'business', customerId: 'cus_acme' }, { customerId: null })).toEqual({
      plan: 'business',
      customerId: undefined,
    });
    expect(await own({ plan: 'business', customerId: 'cus_acme' }, { customerId: null, plan: 'pro' })).toEqual({
      plan: 'pro',
      customerId: undefined,
    });
  });

  it("weighs the key's limits as they will be: those given, else those it has, none once dropped", async () => {
    const loose = { plan: 'business', limits: { perMinute: 301 } };
    await expect(own(loose, { customerId: 'cus_acme' })).rejects.toThrow(
      "limits.perMinute (301) cannot exceed customer cus_acme's 300: a key's own limits can only be tighter",
    );
    await expect(own(loose, { customerId: 'cus_acme', limits: { perMinute: 300 } })).resolves.toMatchObject({
      customerId: 'cus_acme',
    });
    await expect(own(loose, { customerId: 'cus_acme', limits: null })).resolves.toMatchObject({
      customerId: 'cus_acme',
    });
  });

  it('refuses an unknown customer, naming at most 64 characters of it, and a plan that is not its own', async () => {
    const long = `cus_${'x'.repeat(100)}`;
    await expect(own(null, { customerId: long })).rejects.toThrow(
      new KeyOwnershipError(`customerId: no customer ${JSON.stringify(long.slice(0, 64))}`),
    );
    await expect(own(null, { customerId: 'cus_acme', plan: 'pro' })).rejects.toThrow(
      "plan: keys of customer cus_acme are on its plan (business); leave plan out or change the customer's",
    );
    await expect(own(null, { customerId: 'cus_acme', plan: 'business' })).resolves.toMatchObject({ plan: 'business' });
  });
});
