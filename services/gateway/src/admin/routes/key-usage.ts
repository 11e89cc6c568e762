import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { errors } from '../../api/error-responses.js';
import { liveWindows } from '../../api/live-windows.js';
import { KeyIdParams, UsageSchema } from '../../api/schemas.js';
import { findKey, iso } from '../../api/shared.js';
import { unavailable } from '../../api/store-unavailable.js';
import type { KeyUsage } from '../../limits/key-limiter.js';
import { limitsFor, policyForKey } from '../../plans/plans.js';
import type { AdminRouteOptions } from '../route-options.js';

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
      const policy = policyForKey(deps.plans, record, customer);
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

/** A key's live usage; its usage over time is usage-history.ts's. */
export const keyUsageRoutes = liveUsage;
