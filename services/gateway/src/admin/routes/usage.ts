import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { errors } from '../../api/error-responses.js';
import { TopQuery, TopSchema } from '../../api/schemas.js';
import { iso } from '../../api/shared.js';
import { historyUnavailable } from '../../api/store-unavailable.js';
import type { CustomerStore } from '../../customers/customer-store.js';
import { type Counts, hoursOfKeys, series, topCustomers, topKeys } from '../../usage/reports.js';
import { DAY_MS, HOUR_MS, type HourUsage } from '../../usage/usage-history.js';
import type { AdminRouteOptions } from '../route-options.js';

/** Each customer of the top list with its name and plan now; one no store knows, as such. */
async function named(store: CustomerStore, customers: Array<{ id: string } & Counts>) {
  const records = await Promise.all(customers.map((c) => store.get(c.id)));
  return customers.map((counts, i) => ({
    ...counts,
    name: records[i]?.name ?? '',
    plan: records[i]?.plan ?? '(unknown customer)',
  }));
}

/**
 * The busiest keys and customers of a window, with totals per plan and per hour (usage/reports.ts),
 * from the usage history, not the live windows. A key's own series: key-usage.ts; a customer's:
 * customer-usage-history.ts.
 */
export const usageRoutes: FastifyPluginAsyncTypebox<
  AdminRouteOptions<'history' | 'keyStore' | 'keyResolver' | 'customerStore' | 'now'>
> = async (app, { deps }) => {
  const history = deps.history;
  const retentionDays = Math.round(history.retentionMs / DAY_MS);

  app.get(
    '/admin/usage',
    { schema: { querystring: TopQuery, response: { 200: TopSchema, ...errors } } },
    async (request) => {
      const window = request.query.window ?? '24h';
      const sort = request.query.sort ?? 'admitted';
      const limit = request.query.limit ?? 20;
      const hoursInWindow = Number(window.slice(0, -1)) * (window.endsWith('d') ? 24 : 1);
      if (hoursInWindow * HOUR_MS > history.retentionMs) {
        throw new ApiError(
          400,
          'invalid_request',
          `The history is kept for ${retentionDays} days: window ${window} is longer`,
        );
      }
      const now = deps.now();
      const to = now - (now % HOUR_MS) + HOUR_MS;
      const from = to - hoursInWindow * HOUR_MS;
      let perKey: Array<[string, HourUsage[]]>;
      let perCustomer: Array<[string, HourUsage[]]>;
      let ids: string[];
      try {
        ids = await history.activeKeys(from, to);
      } catch (err) {
        historyUnavailable(err, request.log);
      }
      // The records of the keys with usage in the window only, not every key in the store.
      const records = new Map((await deps.keyStore.getMany(ids)).map((r) => [r.id, r]));
      for (const id of ids) {
        const fromFile = deps.keyResolver.fileRecord(id);
        if (fromFile) records.set(id, fromFile);
      }
      try {
        // A key of a customer keeps its hours since it joined it in the customer's slot too.
        perKey = await hoursOfKeys((id) => history.hours(id, from, to, records.get(id)?.customerId), ids);
        const customerIds = await history.activeCustomers(from, to);
        perCustomer = await hoursOfKeys((id) => history.hours(id, from, to), customerIds);
      } catch (err) {
        historyUnavailable(err, request.log);
      }
      const top = topKeys(perKey, records, sort);
      const customers = topCustomers(perCustomer, sort);
      const hourly = series(
        perKey.flatMap(([, hours]) => hours),
        from,
        to,
        HOUR_MS,
      );
      return {
        window,
        from: iso(from),
        to: iso(to),
        sort,
        totals: { ...top.totals, customers: customers.length },
        plans: top.plans,
        hours: hourly.map(({ start, ...counts }) => ({ start: iso(start), ...counts })),
        keys: top.keys.slice(0, limit),
        customers: await named(deps.customerStore, customers.slice(0, limit)),
      };
    },
  );
};
