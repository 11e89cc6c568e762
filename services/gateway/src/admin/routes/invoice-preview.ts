import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { sendInvoiceCsv, wantsCsv } from '../../api/csv.js';
import { CustomerIdParams } from '../../api/customer-schemas.js';
import { InvoicePreviewQuery, InvoicePreviewSchema } from '../../api/invoice-schemas.js';
import { KeyIdParams } from '../../api/schemas.js';
import { errors, findCustomer, findLoneKey } from '../../api/shared.js';
import { historyUnavailable } from '../../api/store-unavailable.js';
import { type CreditRecord, creditOwnerOf } from '../../billing/credit-owner.js';
import { type Invoice, InvoiceTooLargeError, invoiceFor } from '../../billing/invoice.js';
import { creditsSpent } from '../../credits/credits-spent.js';
import { customerHistory } from '../../customers/customer-history.js';
import type { GatewayDeps } from '../../deps.js';
import { DEFAULT_BILLING } from '../../limits/billing-period.js';
import type { AdminRouteOptions } from '../route-options.js';

type Deps = Pick<GatewayDeps, 'history' | 'credits' | 'webhooks' | 'plans' | 'now'>;

export type InvoicePeriod = 'current' | 'previous';

const NOUN = { customer: 'Customer', key: 'Key' } as const;

/**
 * The invoice for one billing period of a customer or of a key standing for itself (the record a
 * balance belongs to: one code for both, as their credits have). Its units are the usage
 * history's own for that period: a customer's the same call its history route makes, in its
 * calendar; a lone key's its own hours over the UTC month from the 1st (DEFAULT_BILLING), the
 * month its refills, its month window and its history's `period` use, so each agrees with its
 * history route. Its credits are the ledger's spend in it. 409 for a plan without a price. The
 * portal shows the signed-in customer the same preview (portal/invoice-routes.ts).
 */
export async function invoicePreview(
  deps: Deps,
  of: CreditRecord,
  period: InvoicePeriod,
  log: { error(obj: object, msg: string): void },
) {
  const { id, name, plan } = of.record;
  const price = deps.plans.plans.get(plan)?.price;
  if (!price) {
    throw new ApiError(
      409,
      'conflict',
      `${NOUN[of.kind]} ${id}'s plan ${plan} has no price: give it one in PLANS_FILE (plans.${plan}.price)`,
    );
  }
  const now = deps.now();
  const billing = of.kind === 'customer' ? of.record.billing : DEFAULT_BILLING;
  const history = await customerHistory(
    deps.history,
    { id, name, billing },
    { period, granularity: 'period' },
    now,
    (err) => historyUnavailable(err, log),
  );
  const from = Date.parse(history.from);
  const to = Date.parse(history.to);
  const owner = creditOwnerOf(deps.plans, of);
  const credits = owner.terms ? await creditsSpent(deps, owner, from, to, now) : null;
  let invoice: Invoice;
  try {
    invoice = invoiceFor(price, history.totals.units, credits);
  } catch (err) {
    if (err instanceof InvoiceTooLargeError) throw new ApiError(409, 'conflict', err.message);
    throw err;
  }
  return {
    id,
    name,
    plan,
    period,
    from: history.from,
    to: history.to,
    units: history.totals.units,
    creditsUsed: credits,
    ...invoice,
  };
}

type RouteDeps = Deps & Pick<GatewayDeps, 'customerStore' | 'keyStore' | 'keyResolver'>;

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
        const preview = await invoicePreview(deps, of, request.query.period ?? 'current', request.log);
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
