import type { Invoice } from './invoice.js';

const HEADER = 'line,description,quantity,billed_units,unit_price,per,amount,currency';

const field = (text: string) => (/[",\n\r]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text);

/**
 * An invoice as CSV (RFC 4180, CRLF): one row per line, then the total, every amount in minor
 * units with its currency. The admin route and the CLI write the same file from it.
 */
export function invoiceCsv(invoice: Invoice): string {
  const rows = invoice.lines.map((l) =>
    [l.line, field(l.description), l.quantity, l.billedUnits ?? '', l.unitPrice ?? '', l.per ?? '', l.amount]
      .concat(invoice.currency)
      .join(','),
  );
  rows.push(['total', 'Total', '', '', '', '', invoice.total, invoice.currency].join(','));
  return `${[HEADER, ...rows].join('\r\n')}\r\n`;
}
