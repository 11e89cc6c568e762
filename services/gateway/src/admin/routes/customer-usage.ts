import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { CustomerIdParams, CustomerUsageSchema } from '../../api/customer-schemas.js';
import { errors } from '../../api/error-responses.js';
import { liveWindows } from '../../api/live-windows.js';
import { findCustomer } from '../../api/shared.js';
import { unavailable } from '../../api/store-unavailable.js';
import type { WindowUsage } from '../../limits/key-limiter.js';
import { limitsFor, policyForCustomer } from '../../plans/plans.js';
import type { AdminRouteOptions } from '../route-options.js';

/**
 * A customer's live shared windows: what all its keys used together in each, and when it resets
 * (in the customer's billing calendar for its day and month), as GET /admin/keys/:id/usage
 * answers for a key's own.
 */
export const customerUsageRoutes: FastifyPluginAsyncTypebox<
  AdminRouteOptions<'customerStore' | 'limiter' | 'plans'>
> = async (app, { deps }) => {
  app.get(
    '/admin/customers/:id/usage',
    { schema: { params: CustomerIdParams, response: { 200: CustomerUsageSchema, ...errors } } },
    async (request) => {
      const customer = await findCustomer(deps, request.params.id);
      const limits = limitsFor(deps.plans, customer.plan, customer.limits);
      const body = { id: customer.id, plan: customer.plan, limits, billing: customer.billing, windows: {} };
      // A customer whose plan has no windows (and that has no limits of its own) shares none.
      if (Object.keys(limits).length === 0) return body;
      const policy = policyForCustomer(deps.plans, customer);
      let usage: WindowUsage[];
      try {
        usage = await deps.limiter.customerUsage(customer.id, policy);
      } catch (err) {
        request.log.error({ err }, 'cannot read usage');
        throw unavailable('rate_limiter_unavailable', 'Cannot reach the rate limiter to read usage');
      }
      return { ...body, windows: liveWindows(policy, usage, 'customer') };
    },
  );
};
