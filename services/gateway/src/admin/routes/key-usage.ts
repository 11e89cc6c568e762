import { ApiError } from '@animal-store/common/errors.js';
import { instant } from '@animal-store/common/rfc3339.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static } from 'typebox';
import { sendCsv, wantsCsv } from '../../api/csv.js';
import { liveWindows } from '../../api/live-windows.js';
import { HistoryQuery, HistorySchema, KeyIdParams, UsageSchema } from '../../api/schemas.js';
import { errors, findKey, iso } from '../../api/shared.js';
import { historyUnavailable, unavailable } from '../../api/store-unavailable.js';
import type { KeyUsage } from '../../limits/key-limiter.js';
import { limitsFor, policyForCustomerKey, policyForKey } from '../../plans/plans.js';
import { series, sumOf, withRefused } from '../../usage/reports.js';
import { DAY_MS, HOUR_MS, type HourUsage } from '../../usage/usage-history.js';
import type { AdminRouteOptions } from '../route-options.js';

type Granularity = 'hour' | 'day';

type HistoryRange = Pick<Static<typeof HistoryQuery>, 'from' | 'to' | 'period'>;

/** The start of the step (hour or day) holding `ms`. */
const stepStart = (ms: number, step: number) => ms - (((ms % step) + step) % step);

/**
 * The steps [from, to) a history query asks for. `from` and `to` are instants, or dates naming
 * whole UTC days: `to=2026-11-30` includes the 30th. `period` is a calendar month in UTC, the one
 * the month quota counts (`current`: so far; `previous`: all of it). A range reaching past now ends
 * with the step that holds now, so "this month so far" is one request on any day of it.
 */
function historyRange(query: HistoryRange, now: number, step: number): { from: number; to: number } {
  const current = stepStart(now, step) + step;
  if (query.period !== undefined) {
    if (query.from !== undefined || query.to !== undefined) {
      throw new ApiError(
        400,
        'invalid_request',
        'period names the range itself: give period, or from and to, not both',
      );
    }
    const today = new Date(now);
    const monthStart = Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), 1);
    if (query.period === 'current') return { from: monthStart, to: current };
    return { from: Date.UTC(today.getUTCFullYear(), today.getUTCMonth() - 1, 1), to: monthStart };
  }
  let to = current;
  if (query.to !== undefined) {
    const end = instant(query.to, 'to') + (/^\d{4}-\d{2}-\d{2}$/.test(query.to) ? DAY_MS : 0);
    to = Math.min(stepStart(end + step - 1, step), current);
  }
  const from =
    query.from === undefined
      ? to - (step === HOUR_MS ? 24 * HOUR_MS : 30 * DAY_MS)
      : stepStart(instant(query.from, 'from'), step);
  if (from >= current) {
    throw new ApiError(
      400,
      'invalid_request',
      `from must not be after the current ${step === HOUR_MS ? 'hour' : 'day'}`,
    );
  }
  if (from >= to) throw new ApiError(400, 'invalid_request', 'from must be before to');
  return { from, to };
}

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
      const { from, to } = historyRange(request.query, now, step);
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
