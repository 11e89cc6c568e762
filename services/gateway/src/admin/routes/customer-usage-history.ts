import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { sendCsv, wantsCsv } from '../../api/csv.js';
import { CustomerHistoryQuery, CustomerHistorySchema } from '../../api/customer-history-schemas.js';
import { CustomerIdParams } from '../../api/customer-schemas.js';
import { errors, findCustomer } from '../../api/shared.js';
import { historyUnavailable } from '../../api/store-unavailable.js';
import { customerHistory } from '../../customers/customer-history.js';
import type { AdminRouteOptions } from '../route-options.js';

/**
 * A customer's usage over time, summed from its own hours in the history (the limiter writes
 * them with its keys', under the customer's id): by hour (its local hour: a UTC hour, or from :30
 * or :15 past it in a zone a part-hour off UTC), local day or billing period, JSON or CSV for billing.
 */
export const customerUsageHistoryRoutes: FastifyPluginAsyncTypebox<
  AdminRouteOptions<'history' | 'customerStore' | 'now'>
> = async (app, { deps }) => {
  app.get(
    '/admin/customers/:id/usage/history',
    {
      schema: {
        params: CustomerIdParams,
        querystring: CustomerHistoryQuery,
        response: { 200: CustomerHistorySchema, ...errors },
      },
    },
    async (request, reply) => {
      const customer = await findCustomer(deps, request.params.id);
      const body = await customerHistory(deps.history, customer, request.query, deps.now(), (err) =>
        historyUnavailable(err, request.log),
      );
      return wantsCsv(request.query.format, request.headers.accept) ? sendCsv(reply, body, true) : body;
    },
  );
};
