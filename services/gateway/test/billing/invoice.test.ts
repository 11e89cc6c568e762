import { describe, expect, it } from 'vitest';
import { InvoiceTooLargeError, invoiceFor } from '../../src/billing/invoice.js';
import type { PlanPrice } from '../../src/plans/plan-price.js';

/*
 * The invoice from a price, a period's units and its credits: every amount an integer in minor
 * units, the overage rounded up to a whole `per`.
 */

const PRO: PlanPrice = { currency: 'EUR', base: 4900, includedUnits: 100_000, unitPrice: 50, per: 1000 };

const line = (invoice: ReturnType<typeof invoiceFor>, kind: string) => invoice.lines.find((l) => l.line === kind);

describe('invoiceFor', () => {
  it.each([
    // [case, units, included, overage units, billed units, overage amount, total]
    ['zero usage', 0, 0, 0, 0, 0, 4900],
    ['below the included units', 99_999, 99_999, 0, 0, 0, 4900],
    ['exactly the included units', 100_000, 100_000, 0, 0, 0, 4900],
    ['one unit over: a whole per', 100_001, 100_000, 1, 1000, 50, 4950],
    ['one per over', 101_000, 100_000, 1000, 1000, 50, 4950],
    ['one per and one unit over', 101_001, 100_000, 1001, 2000, 100, 5000],
    ['beyond 2^31 units', 2 ** 31 + 5, 100_000, 2 ** 31 + 5 - 100_000, 2_147_384_000, 107_369_200, 107_374_100],
  ] as const)('%s: %d units', (_case, units, included, overUnits, billed, overage, total) => {
    const invoice = invoiceFor(PRO, units, null);
    expect(invoice.currency).toBe('EUR');
    expect(line(invoice, 'base')).toMatchObject({ quantity: 1, amount: 4900 });
    expect(line(invoice, 'included')).toMatchObject({ quantity: included, amount: 0 });
    expect(line(invoice, 'overage')).toMatchObject({
      quantity: overUnits,
      billedUnits: billed,
      unitPrice: 50,
      per: 1000,
      amount: overage,
    });
    expect(invoice.total).toBe(total);
    expect(invoice.lines.map((l) => l.line)).toEqual(['base', 'included', 'overage']);
  });

  it('prices per single unit and with nothing included', () => {
    const invoice = invoiceFor({ currency: 'JPY', base: 0, includedUnits: 0, unitPrice: 3, per: 1 }, 7, null);
    expect(line(invoice, 'overage')).toMatchObject({ quantity: 7, billedUnits: 7, amount: 21 });
    expect(invoice.total).toBe(21);
  });

  it('shows the credits spent as a line of their own that adds nothing: they were paid for when bought', () => {
    const invoice = invoiceFor(PRO, 100_500, 250);
    expect(line(invoice, 'credits')).toMatchObject({ quantity: 250, amount: 0 });
    expect(invoice.total).toBe(4950);
    expect(invoiceFor(PRO, 0, 0).lines.map((l) => l.line)).toEqual(['base', 'included', 'overage', 'credits']);
  });

  it.each([
    // [case, units, credits spent, included, overage units, total]
    ['every unit paid by credits: none included nor over', 100_500, 100_500, 0, 0, 4900],
    ['more credits than units (a part-hour zone): none over, none below zero', 10, 12, 0, 0, 4900],
    ['the units credits did not pay meet the included units first', 100_500, 400, 100_000, 100, 4950],
    ['no credits spent: every unit as without terms', 100_001, 0, 100_000, 1, 4950],
  ] as const)('bills each unit once, %s', (_case, units, credits, included, overUnits, total) => {
    const invoice = invoiceFor(PRO, units, credits);
    expect(line(invoice, 'included')?.quantity).toBe(included);
    expect(line(invoice, 'overage')?.quantity).toBe(overUnits);
    expect(line(invoice, 'credits')).toMatchObject({ quantity: credits, amount: 0 });
    expect(invoice.total).toBe(total);
  });

  it('counts big numbers exactly in integers, past 2^53 in the product', () => {
    const price: PlanPrice = { currency: 'EUR', base: 1, includedUnits: 0, unitPrice: 1_000_000, per: 1000 };
    // 2^40 units is 1,099,511,628 blocks of 1000 (rounded up); times 1,000,000 stays below 2^53.
    const units = 2 ** 40;
    const invoice = invoiceFor(price, units, null);
    expect(line(invoice, 'overage')?.amount).toBe(1_099_511_628_000_000);
    expect(invoice.total).toBe(1_099_511_628_000_001);
    expect(Number.isSafeInteger(invoice.total)).toBe(true);
  });

  it('refuses an amount a JSON number cannot carry exactly', () => {
    const price: PlanPrice = { currency: 'EUR', base: 0, includedUnits: 0, unitPrice: 2 ** 40, per: 1 };
    expect(() => invoiceFor(price, 2 ** 20, null)).toThrow(InvoiceTooLargeError);
  });

  it('carries 2^53 − 1 minor units exactly, and names the amount one past it', () => {
    const max = Number.MAX_SAFE_INTEGER;
    const price: PlanPrice = { currency: 'EUR', base: 0, includedUnits: 0, unitPrice: max, per: 1 };
    expect(invoiceFor(price, 1, null).total).toBe(max);
    expect(() => invoiceFor(price, 2, null)).toThrow(
      new InvoiceTooLargeError(
        `the overage is ${2n * BigInt(max)} minor units, beyond 2^53 − 1: it cannot be shown exactly`,
      ),
    );
    expect(() => invoiceFor({ ...price, base: 1 }, 1, null)).toThrow(/^the total is 9007199254740992 minor units/);
    // Units billed by whole blocks of 2^52: two blocks are 2^53 units, one past what a number carries.
    const blocks: PlanPrice = { currency: 'EUR', base: 0, includedUnits: 0, unitPrice: 0, per: 2 ** 52 };
    expect(() => invoiceFor(blocks, 2 ** 52 + 1, null)).toThrow(/^the billed overage units is 9007199254740992 minor/);
  });
});
