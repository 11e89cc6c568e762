import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { sendCsv, wantsCsv } from '../../api/csv.js';
import { liveWindows } from '../../api/live-windows.js';
import { HistoryQuery, HistorySchema, KeyIdParams, UsageSchema } from '../../api/schemas.js';
import { errors, findKey, iso } from '../../api/shared.js';
import { historyUnavailable, unavailable } from '../../api/store-unavailable.js';
import { historyRange } from '../../customers/customer-history.js';
import { DEFAULT_BILLING } from '../../limits/billing-period.js';
import type { KeyUsage } from '../../limits/key-limiter.js';
import { limitsFor, policyForCustomerKey, policyForKey } from '../../plans/plans.js';
import { series, sumOf, withRefused } from '../../usage/reports.js';
import { DAY_MS, HOUR_MS, type HourUsage } from '../../usage/usage-history.js';
import type { AdminRouteOptions } from '../route-options.js';

type Granularity = 'hour' | 'day';

/** The start of the step (hour or day) holding `ms`. */
const stepStart = (ms: number, step: number) => ms - (((ms % step) + step) % step);

/**
 * A key's live usage as the shared limiter counts it: every window, its ban, its refusals; for a
 * key of a customer, also the windows it shares with the customer's other keys.
 */
const liveUsage: FastifyPluginAsyncTypebox<
  AdminRouteOptions<'keyStore' | 'keyResolver' | 'customerStore' | 'limiter' | 'plans'>
> = async (app, { deps }) => {
  app.get(
    '/admin/keys/:id/usage',
    { schema: { params: KeyIdParams, response: { 200: UsageSchema, ...errors } } },
    async (request) => {
      const { record } = await findKey(deps, request.params.id);
      const limits = limitsFor(deps.plans, record.plan, record.limits);
      const customer = record.customerId === undefined ? null : await deps.customerStore.get(record.customerId);
      const policy = customer
        ? policyForCustomerKey(deps.plans, customer, record.limits)
        : policyForKey(deps.plans, record.plan, record.limits, record.credits);
      let usage: KeyUsage;
      try {
        usage = await deps.limiter.usage(record.id, policy, record.customerId);
      } catch (err) {
        request.log.error({ err }, 'cannot read usage');
        throw unavailable('rate_limiter_unavailable', 'Cannot reach the rate limiter to read usage');
      }
      return {
        id: record.id,
        plan: record.plan,
        limits,
        windows: liveWindows(policy, usage.windows, 'key'),
        ...(customer ? { customer: { id: customer.id, windows: liveWindows(policy, usage.windows, 'customer') } } : {}),
        ban: usage.banEndsAt === null ? null : { until: iso(usage.banEndsAt) },
        refusals: usage.refusals,
      };
    },
  );
};

/** A key's usage over time from the usage history: an hourly or daily series, JSON or CSV for billing. */
const usageHistory: FastifyPluginAsyncTypebox<
  AdminRouteOptions<'history' | 'keyStore' | 'keyResolver' | 'now'>
> = async (app, { deps }) => {
  const history = deps.history;
  const retentionDays = Math.round(history.retentionMs / DAY_MS);

  app.get(
    '/admin/keys/:id/usage/history',
    {
      schema: {
        params: KeyIdParams,
        querystring: HistoryQuery,
        response: { 200: HistorySchema, ...errors },
      },
    },
    async (request, reply) => {
      const { record } = await findKey(deps, request.params.id);
      const granularity: Granularity = request.query.granularity ?? 'hour';
      const step = granularity === 'hour' ? HOUR_MS : DAY_MS;
      const now = deps.now();
      // A key's own history is in UTC hours and days, its period the UTC calendar month.
      const { from, to } = historyRange(request.query, now, granularity, DEFAULT_BILLING);
      const oldest = stepStart(now - history.retentionMs, step);
      if (from < oldest) {
        throw new ApiError(
          400,
          'invalid_request',
          `The history is kept for ${retentionDays} days (USAGE_HISTORY_DAYS): from must be on or after ${iso(oldest)}`,
        );
      }
      let hours: HourUsage[];
      try {
        hours = await history.hours(record.id, from, to, record.customerId);
      } catch (err) {
        historyUnavailable(err, request.log);
      }
      const body = {
        id: record.id,
        granularity,
        from: iso(from),
        to: iso(to),
        retentionDays,
        totals: withRefused(sumOf(hours)),
        series: series(hours, from, to, step).map(({ start, ...counts }) => ({ start: iso(start), ...counts })),
      };
      return wantsCsv(request.query.format, request.headers.accept) ? sendCsv(reply, body) : body;
    },
  );
};

/** A key's usage: live, and over time. */
export const keyUsageRoutes: FastifyPluginAsyncTypebox<
  AdminRouteOptions<'history' | 'keyStore' | 'keyResolver' | 'customerStore' | 'limiter' | 'plans' | 'now'>
> = async (app, opts) => {
  await app.register(liveUsage, opts);
  await app.register(usageHistory, opts);
};
