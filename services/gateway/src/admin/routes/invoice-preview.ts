import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { sendInvoiceCsv, wantsCsv } from '../../api/csv.js';
import { CustomerIdParams } from '../../api/customer-schemas.js';
import { errors } from '../../api/error-responses.js';
import { InvoicePreviewQuery, InvoicePreviewSchema } from '../../api/invoice-schemas.js';
import { KeyIdParams } from '../../api/schemas.js';
import { findCustomer, findLoneKey } from '../../api/shared.js';
import { historyUnavailable } from '../../api/store-unavailable.js';
import type { CreditRecord } from '../../billing/credit-owner.js';
import { type InvoicePreviewDeps, invoicePreview } from '../../billing/invoice-preview.js';
import type { GatewayDeps } from '../../deps.js';
import type { AdminRouteOptions } from '../route-options.js';

type RouteDeps = InvoicePreviewDeps & Pick<GatewayDeps, 'customerStore' | 'keyStore' | 'keyResolver'>;

/**
 * What a billing period comes to under the plan's price, JSON or CSV, at `base`/invoice-preview:
 * a customer's, or a lone key's (`find` refuses a key of a customer with 409: it is billed as
 * its customer). One route for both; only how the record is found differs.
 */
function invoicePreviewRoute(
  base: '/admin/customers/:id' | '/admin/keys/:id',
  find: (deps: RouteDeps, id: string) => Promise<CreditRecord>,
): FastifyPluginAsyncTypebox<AdminRouteOptions<keyof RouteDeps>> {
  const params = base === '/admin/keys/:id' ? KeyIdParams : CustomerIdParams;
  return async (app, { deps }) => {
    app.get(
      `${base}/invoice-preview`,
      {
        schema: {
          params,
          querystring: InvoicePreviewQuery,
          response: { 200: InvoicePreviewSchema, ...errors },
        },
      },
      async (request, reply) => {
        const of = await find(deps, (request.params as { id: string }).id);
        const preview = await invoicePreview(deps, of, request.query.period ?? 'current', (err) =>
          historyUnavailable(err, request.log),
        );
        return wantsCsv(request.query.format, request.headers.accept) ? sendInvoiceCsv(reply, preview) : preview;
      },
    );
  };
}

/** A customer's billing period, in its own calendar. */
export const customerInvoicePreviewRoutes = invoicePreviewRoute('/admin/customers/:id', async (deps, id) => ({
  kind: 'customer',
  record: await findCustomer(deps, id),
}));

/** A lone key's billing period, the UTC month (a key without a customer stands for itself). */
export const keyInvoicePreviewRoutes = invoicePreviewRoute('/admin/keys/:id', async (deps, id) => ({
  kind: 'key',
  record: await findLoneKey(deps, id, 'is billed as the customer', 'invoice-preview'),
}));
