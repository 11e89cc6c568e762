import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { sendInvoiceCsv, wantsCsv } from '../api/csv.js';
import { errors } from '../api/error-responses.js';
import { InvoicePreviewQuery, InvoicePreviewSchema } from '../api/invoice-schemas.js';
import { historyUnavailable } from '../api/store-unavailable.js';
import { invoicePreview } from '../billing/invoice-preview.js';
import type { GatewayDeps } from '../deps.js';
import { ownCustomer, signedInCustomer } from './own-keys.js';

type Deps = Pick<GatewayDeps, 'customerStore' | 'history' | 'credits' | 'webhooks' | 'plans' | 'now'>;

const PortalInvoiceQuery = Type.Object(
  {
    ...InvoicePreviewQuery.properties,
    /**
     * The customer, when a caller names one: only the signed-in customer's own id is served, any
     * other answers 404 (and an audit line) as an unknown one would, as a key id of another does.
     */
    customerId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  },
  { additionalProperties: false },
);

/**
 * The signed-in customer's invoice preview, JSON or CSV: the admin API's (invoicePreview), so the
 * two show the same lines and total. A plan without a price has nothing to preview: 404, worded
 * for the customer, as the ledger of a customer without credit terms is.
 */
export const portalInvoiceRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.get(
    '/portal/api/invoice-preview',
    { schema: { querystring: PortalInvoiceQuery, response: { 200: InvoicePreviewSchema, ...errors } } },
    async (request, reply) => {
      ownCustomer(request, request.query.customerId);
      const customer = await signedInCustomer(deps, request);
      if (!deps.plans.plans.get(customer.plan)?.price) {
        throw new ApiError(
          404,
          'not_found',
          `Your plan (${customer.plan}) has no price: there is no invoice to preview`,
        );
      }
      const preview = await invoicePreview(
        deps,
        { kind: 'customer', record: customer },
        request.query.period ?? 'current',
        (err) => historyUnavailable(err, request.log),
      );
      return wantsCsv(request.query.format, request.headers.accept) ? sendInvoiceCsv(reply, preview) : preview;
    },
  );
};
