import { describe, expect, it } from 'vitest';
import { invoiceFor } from '../../src/billing/invoice.js';
import { invoiceCsv } from '../../src/billing/invoice-csv.js';

// The invoice as the CSV file the admin route and the CLI write: RFC 4180, CRLF, minor units.

describe('invoiceCsv', () => {
  it('writes one row per line and a total, quoting a field with a comma, amounts in minor units', () => {
    const price = { currency: 'KWD', base: 12_345, includedUnits: 0, unitPrice: 7, per: 10 };
    // 15 units, 4 of them paid by credits: 11 over (billing.md).
    expect(invoiceCsv(invoiceFor(price, 15, 4)).split('\r\n')).toEqual([
      'line,description,quantity,billed_units,unit_price,per,amount,currency',
      'base,Base fee for the billing period,1,,,,12345,KWD',
      'included,Units included (0),0,,,,0,KWD',
      'overage,"Units beyond those included, 7 per 10 started",11,20,7,10,14,KWD',
      'credits,Prepaid credits spent,4,,,,0,KWD',
      'total,Total,,,,,12359,KWD',
      '',
    ]);
  });

  it('doubles a quote inside a quoted field', () => {
    const invoice = {
      currency: 'EUR',
      lines: [{ line: 'base' as const, description: 'the "pro", monthly', quantity: 1, amount: 1 }],
      total: 1,
    };
    expect(invoiceCsv(invoice).split('\r\n')[1]).toBe('base,"the ""pro"", monthly",1,,,,1,EUR');
  });
});
