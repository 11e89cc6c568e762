import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { KeyUsage, WindowUsage } from '../../limits/key-limiter.js';
import { limitsFor } from '../../plans.js';
import { KeyIdParams, UsageSchema } from '../schemas.js';
import { type AdminRouteOptions, errors, findKey, iso } from '../shared.js';

/** A key's live usage as the shared limiter counts it: both windows, its ban, its refusals. */
export const usageRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions> = async (app, { deps }) => {
  app.get(
    '/admin/keys/:id/usage',
    { schema: { params: KeyIdParams, response: { 200: UsageSchema, ...errors } } },
    async (request) => {
      const { record } = await findKey(deps, request.params.id);
      const limits = limitsFor(record.plan, record.limits);
      let usage: KeyUsage;
      try {
        usage = await deps.limiter.usage(record.id);
      } catch (err) {
        request.log.error({ err }, 'cannot read usage');
        throw new ApiError(503, 'rate_limiter_unavailable', 'Cannot reach the rate limiter to read usage; retry');
      }
      const window = (limit: number, w: WindowUsage) => ({
        limit,
        used: w.used,
        remaining: Math.max(0, limit - w.used),
        resetAt: w.resetAt === null ? null : iso(w.resetAt),
      });
      return {
        id: record.id,
        plan: record.plan,
        limits,
        windows: { minute: window(limits.perMinute, usage.minute), day: window(limits.perDay, usage.day) },
        ban: usage.banEndsAt === null ? null : { until: iso(usage.banEndsAt) },
        refusals: usage.refusals,
      };
    },
  );
};
