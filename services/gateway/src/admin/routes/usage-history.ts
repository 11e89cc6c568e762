import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { sendCsv, wantsCsv } from '../../api/csv.js';
import { CustomerIdParams } from '../../api/customer-schemas.js';
import { errors } from '../../api/error-responses.js';
import { HistoryQuery, HistorySchema } from '../../api/history-schemas.js';
import { KeyIdParams } from '../../api/schemas.js';
import { findCustomer, findKey } from '../../api/shared.js';
import { historyUnavailable } from '../../api/store-unavailable.js';
import { type HistorySubject, subjectHistory } from '../../customers/subject-history.js';
import type { GatewayDeps } from '../../deps.js';
import { DEFAULT_BILLING } from '../../limits/billing-period.js';
import type { AdminRouteOptions } from '../route-options.js';

type Deps = Pick<GatewayDeps, 'history' | 'customerStore' | 'keyStore' | 'keyResolver' | 'now'>;

/** The subject a route's id names, and whose hours its history sums. */
type Found = { subject: HistorySubject; hoursOf: { id: string; customerId?: string } };

/**
 * `<base>/usage/history`: a subject's usage over time, from the hours the limiter wrote, by hour,
 * day or billing period of its calendar, JSON or CSV for billing. One route for a customer and a
 * key: they differ only in what the id names.
 */
function historyRoutes(
  base: string,
  params: typeof CustomerIdParams | typeof KeyIdParams,
  find: (deps: Deps, id: string) => Promise<Found>,
): FastifyPluginAsyncTypebox<AdminRouteOptions<'history' | 'customerStore' | 'keyStore' | 'keyResolver' | 'now'>> {
  return async (app, { deps }) => {
    app.get(
      `${base}/usage/history`,
      { schema: { params, querystring: HistoryQuery, response: { 200: HistorySchema, ...errors } } },
      async (request, reply) => {
        const { subject, hoursOf } = await find(deps, (request.params as { id: string }).id);
        const body = await subjectHistory(
          deps.history,
          subject,
          request.query,
          deps.now(),
          (err) => historyUnavailable(err, request.log),
          hoursOf,
        );
        return wantsCsv(request.query.format, request.headers.accept) ? sendCsv(reply, body) : body;
      },
    );
  };
}

/** A customer's: its own hours (the limiter writes them with its keys'), in its own calendar. */
export const customerUsageHistoryRoutes = historyRoutes('/admin/customers/:id', CustomerIdParams, async (deps, id) => {
  const customer = await findCustomer(deps, id);
  return { subject: customer, hoursOf: { id: customer.id } };
});

/** A key's: its own hours (under its customer, if it has one), by the UTC calendar with the 1st. */
export const keyUsageHistoryRoutes = historyRoutes('/admin/keys/:id', KeyIdParams, async (deps, id) => {
  const { record } = await findKey(deps, id);
  return {
    subject: { id: record.id, name: record.name, billing: DEFAULT_BILLING },
    hoursOf: { id: record.id, ...(record.customerId !== undefined ? { customerId: record.customerId } : {}) },
  };
});
