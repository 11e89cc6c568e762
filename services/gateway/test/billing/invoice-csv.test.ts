import { describe, expect, it } from 'vitest';
import { type Invoice, invoiceFor } from '../../src/billing/invoice.js';
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

  // The CSV alone against the JSON alone: a reader of either file must see the same invoice.
  it.each([
    [
      'no usage, no credits terms',
      { currency: 'EUR', base: 4900, includedUnits: 100, unitPrice: 50, per: 1000 },
      0,
      null,
    ],
    [
      'exactly the included units',
      { currency: 'EUR', base: 4900, includedUnits: 100, unitPrice: 50, per: 1000 },
      100,
      0,
    ],
    ['one unit over: a whole per', { currency: 'USD', base: 0, includedUnits: 100, unitPrice: 50, per: 1000 }, 101, 0],
    ['credits paying some units', { currency: 'JPY', base: 990, includedUnits: 0, unitPrice: 3, per: 1 }, 17, 5],
    ['past 2^40 units', { currency: 'KWD', base: 1, includedUnits: 0, unitPrice: 1_000_000, per: 1000 }, 2 ** 40, 7],
  ] as const)('says what the JSON says, line by line and in total: %s', (_case, price, units, credits) => {
    const invoice: Invoice = invoiceFor(price, units, credits);
    const [header, ...rows] = invoiceCsv(invoice).split('\r\n').slice(0, -1).map(cells);
    expect(header).toEqual([
      'line',
      'description',
      'quantity',
      'billed_units',
      'unit_price',
      'per',
      'amount',
      'currency',
    ]);
    const text = (n: number | undefined) => (n === undefined ? '' : String(n));
    expect(rows).toEqual([
      ...invoice.lines.map((l) => [
        l.line,
        l.description,
        String(l.quantity),
        text(l.billedUnits),
        text(l.unitPrice),
        text(l.per),
        String(l.amount),
        invoice.currency,
      ]),
      ['total', 'Total', '', '', '', '', String(invoice.total), invoice.currency],
    ]);
    // The total row is the lines' amounts summed, as the JSON's total is.
    const amounts = rows.slice(0, -1).map((r) => BigInt(r[6] as string));
    expect(String(amounts.reduce((a, b) => a + b, 0n))).toBe(rows.at(-1)?.[6]);
  });
});

/** One CSV row's fields (RFC 4180: a quoted field may hold commas and doubled quotes). */
function cells(row: string): string[] {
  const out: string[] = [];
  let at = 0;
  while (at <= row.length) {
    if (row[at] === '"') {
      let value = '';
      let i = at + 1;
      for (;;) {
        const quote = row.indexOf('"', i);
        value += row.slice(i, quote);
        if (row[quote + 1] === '"') {
          value += '"';
          i = quote + 2;
        } else {
          at = quote + 2;
          break;
        }
      }
      out.push(value);
    } else {
      const comma = row.indexOf(',', at);
      const end = comma === -1 ? row.length : comma;
      out.push(row.slice(at, end));
      at = end + 1;
    }
  }
  return out;
}
