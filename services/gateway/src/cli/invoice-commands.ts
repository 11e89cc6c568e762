import type { Static } from 'typebox';
import type { InvoicePreviewSchema } from '../api/invoice-schemas.js';
import { invoiceCsv } from '../billing/invoice-csv.js';
import type { AdminClient } from './admin-client.js';
import type { Values } from './flags.js';
import { jsonLine, printable, table } from './format.js';

/*
 * `keys customers invoice ID` and `keys invoice ID` (a lone key's): an invoice preview, through
 * the admin API; one command for both, as the admin API has one contract.
 */

type Preview = Static<typeof InvoicePreviewSchema>;

/** Minor units as text, without floating point: 4950 with 2 digits is 49.50. */
function money(minor: number, currency: string): string {
  const digits = new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions()
    .maximumFractionDigits as number;
  if (digits === 0) return `${minor} ${currency}`;
  const text = String(minor).padStart(digits + 1, '0');
  return `${text.slice(0, -digits)}.${text.slice(-digits)} ${currency}`;
}

function previewText(p: Preview): string {
  const rows = p.lines.map((l) => [
    l.line,
    printable(l.description),
    String(l.quantity),
    l.billedUnits === undefined ? '' : String(l.billedUnits),
    money(l.amount, p.currency),
  ]);
  rows.push(['total', '', '', '', money(p.total, p.currency)]);
  return (
    `${printable(p.id)} (${printable(p.name)}), plan ${printable(p.plan)}: ${p.period} period ${p.from} to ${p.to}\n` +
    table(['LINE', 'DESCRIPTION', 'QUANTITY', 'BILLED', 'AMOUNT'], rows)
  );
}

/** Whose invoice: a customer's (`customers invoice`) or a lone key's (`invoice`). */
type Owner = 'customers' | 'keys';

/**
 * `customers invoice ID` or `invoice ID` (a lone key's) `[--previous] [--csv]`: the lines and
 * total of the billing period.
 */
export async function invoice(admin: AdminClient, owner: Owner, id: string, values: Values): Promise<void> {
  const period = values.previous ? 'previous' : 'current';
  const path = `/admin/${owner}/${encodeURIComponent(id)}/invoice-preview?period=${period}`;
  const preview = await admin.request<Preview>('GET', path);
  if (values.csv) process.stdout.write(invoiceCsv(preview));
  else process.stdout.write(values.json ? `${jsonLine(preview)}\n` : previewText(preview));
}
