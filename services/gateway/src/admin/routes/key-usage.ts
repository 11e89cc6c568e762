import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { KeyUsage } from '../../limits/key-limiter.js';
import { LIMIT_FIELDS, limitsFor, policyForKey } from '../../plans/plans.js';
import { KeyIdParams, UsageSchema } from '../schemas.js';
import { type AdminRouteOptions, errors, findKey, iso } from '../shared.js';
import { unavailable } from '../store-unavailable.js';

/** A key's live usage as the shared limiter counts it: every window, its ban, its refusals. */
export const keyUsageRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions> = async (app, { deps }) => {
  app.get(
    '/admin/keys/:id/usage',
    { schema: { params: KeyIdParams, response: { 200: UsageSchema, ...errors } } },
    async (request) => {
      const { record } = await findKey(deps, request.params.id);
      const limits = limitsFor(deps.plans, record.plan, record.limits);
      let usage: KeyUsage;
      try {
        usage = await deps.limiter.usage(record.id, policyForKey(deps.plans, record.plan, record.limits));
      } catch (err) {
        request.log.error({ err }, 'cannot read usage');
        throw unavailable('rate_limiter_unavailable', 'Cannot reach the rate limiter to read usage');
      }
      const windows: Record<string, { limit: number; used: number; remaining: number; resetAt: string | null }> = {};
      for (const w of usage.windows) {
        const limit = limits[LIMIT_FIELDS[w.name]] as number;
        windows[w.name] = {
          limit,
          used: w.used,
          remaining: Math.max(0, limit - w.used),
          resetAt: w.resetAt === null ? null : iso(w.resetAt),
        };
      }
      return {
        id: record.id,
        plan: record.plan,
        limits,
        windows,
        ban: usage.banEndsAt === null ? null : { until: iso(usage.banEndsAt) },
        refusals: usage.refusals,
      };
    },
  );
};
