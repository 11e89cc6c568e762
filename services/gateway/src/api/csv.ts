import type { FastifyReply } from 'fastify';
import { invoiceCsv } from '../billing/invoice-csv.js';
import { type Counts, toCsv } from '../usage/reports.js';

/*
 * What the admin routes and the portal share to read a history query and answer in CSV.
 */

/** Whether a history request asks for CSV: `format=csv`, or no format and an Accept naming text/csv. */
export function wantsCsv(format: string | undefined, accept: string | undefined): boolean {
  return format === 'csv' || (format === undefined && /\btext\/csv\b/.test(accept ?? ''));
}

/** Sends a history as a CSV file for billing, named for its subject, first hour and step. */
export function sendCsv(
  reply: FastifyReply,
  body: { id: string; from: string; granularity: string; series: Array<{ start: string; end: string } & Counts> },
): FastifyReply {
  return sendCsvFile(reply, `usage-${body.id}-${body.from.slice(0, 13)}-${body.granularity}.csv`, toCsv(body.series));
}

/** Sends CSV text as a file download under `file` (characters unsafe in the header replaced). */
function sendCsvFile(reply: FastifyReply, file: string, csv: string): FastifyReply {
  return (
    reply
      .type('text/csv; charset=utf-8')
      .header('content-disposition', `attachment; filename="${file.replace(/[^\w.:-]/g, '_')}"`)
      // A string body with its own type is sent as it is: the 200 schema describes the JSON answer.
      .send(csv as never)
  );
}

type Preview = Parameters<typeof invoiceCsv>[0] & { id: string; from: string };

/** The preview as a CSV file named for its customer or key and the period's first day. */
export function sendInvoiceCsv(reply: FastifyReply, preview: Preview): FastifyReply {
  return sendCsvFile(reply, `invoice-${preview.id}-${preview.from.slice(0, 10)}.csv`, invoiceCsv(preview));
}
