import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import { type Invoice, InvoiceTooLargeError, invoiceFor } from '../../billing/invoice.js';
import { invoiceCsv } from '../../billing/invoice-csv.js';
import { customerOwner } from '../../credits/credit-owner.js';
import { creditsSpent } from '../../credits/credits-spent.js';
import type { CustomerRecord } from '../../customers/customer-store.js';
import type { GatewayDeps } from '../../deps.js';
import { CustomerIdParams } from '../customer-schemas.js';
import { InvoicePreviewQuery, InvoicePreviewSchema } from '../invoice-schemas.js';
import { type AdminRouteOptions, errors, findCustomer } from '../shared.js';
import { customerHistory } from './customer-usage-history.js';
import { sendCsvFile, wantsCsv } from './key-usage.js';

type Deps = Pick<GatewayDeps, 'history' | 'credits' | 'webhooks' | 'plans' | 'now'>;

export type InvoicePeriod = 'current' | 'previous';

/**
 * The invoice for one of the customer's billing periods: its units are the customer usage
 * history's own for that period (the same call the history route makes, so the two never
 * differ), its credits the ledger's spend in it. 409 for a plan without a price. The portal
 * shows the signed-in customer the same preview (portal/invoice-routes.ts).
 */
export async function invoicePreview(
  deps: Deps,
  customer: CustomerRecord,
  period: InvoicePeriod,
  log: { error(obj: object, msg: string): void },
) {
  const price = deps.plans.plans.get(customer.plan)?.price;
  if (!price) {
    throw new ApiError(
      409,
      'conflict',
      `Customer ${customer.id}'s plan ${customer.plan} has no price: give it one in PLANS_FILE (plans.${customer.plan}.price)`,
    );
  }
  const now = deps.now();
  const history = await customerHistory(deps.history, customer, { period, granularity: 'period' }, now, log);
  const from = Date.parse(history.from);
  const to = Date.parse(history.to);
  const owner = customerOwner(deps.plans, customer);
  const credits = owner.terms ? await creditsSpent(deps, owner, from, to, now) : null;
  let invoice: Invoice;
  try {
    invoice = invoiceFor(price, history.totals.units, credits);
  } catch (err) {
    if (err instanceof InvoiceTooLargeError) throw new ApiError(409, 'conflict', err.message);
    throw err;
  }
  return {
    id: customer.id,
    name: customer.name,
    plan: customer.plan,
    period,
    from: history.from,
    to: history.to,
    units: history.totals.units,
    creditsUsed: credits,
    ...invoice,
  };
}

type Preview = Awaited<ReturnType<typeof invoicePreview>>;

/** The preview as a CSV file named for the customer and the period's first day. */
export function sendInvoiceCsv(reply: FastifyReply, preview: Preview): FastifyReply {
  return sendCsvFile(reply, `invoice-${preview.id}-${preview.from.slice(0, 10)}.csv`, invoiceCsv(preview));
}

/** What a customer's billing period comes to under its plan's price, JSON or CSV. */
export const customerInvoicePreviewRoutes: FastifyPluginAsyncTypebox<
  AdminRouteOptions<'history' | 'customerStore' | 'credits' | 'webhooks' | 'plans' | 'now'>
> = async (app, { deps }) => {
  app.get(
    '/admin/customers/:id/invoice-preview',
    {
      schema: {
        params: CustomerIdParams,
        querystring: InvoicePreviewQuery,
        response: { 200: InvoicePreviewSchema, ...errors },
      },
    },
    async (request, reply) => {
      const customer = await findCustomer(deps, request.params.id);
      const preview = await invoicePreview(deps, customer, request.query.period ?? 'current', request.log);
      return wantsCsv(request.query.format, request.headers.accept) ? sendInvoiceCsv(reply, preview) : preview;
    },
  );
};
