import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { hoursOfKeys, series, topKeys } from '../../usage/reports.js';
import { DAY_MS, HOUR_MS, type HourUsage } from '../../usage/usage-history.js';
import { TopQuery, TopSchema } from '../schemas.js';
import { type AdminRouteOptions, errors, iso } from '../shared.js';
import { historyUnavailable } from '../store-unavailable.js';

/**
 * The busiest keys of a window, with totals per plan and per hour (usage/reports.ts), from the
 * usage history, not the live windows. A key's own series: key-usage.ts.
 */
export const usageRoutes: FastifyPluginAsyncTypebox<
  AdminRouteOptions<'history' | 'keyStore' | 'keyResolver' | 'now'>
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
      const records = new Map((await deps.keyStore.list()).map((r) => [r.id, r]));
      for (const r of deps.keyResolver.fileRecords()) records.set(r.id, r);
      let perKey: Array<[string, HourUsage[]]>;
      try {
        const ids = await history.activeKeys(from, to);
        // A key of a customer keeps its hours since it joined it in the customer's slot too.
        perKey = await hoursOfKeys((id) => history.hours(id, from, to, records.get(id)?.customerId), ids);
      } catch (err) {
        historyUnavailable(err, request.log);
      }
      const top = topKeys(perKey, records, sort);
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
        totals: top.totals,
        plans: top.plans,
        hours: hourly.map(({ start, ...counts }) => ({ start: iso(start), ...counts })),
        keys: top.keys.slice(0, limit),
      };
    },
  );
};
