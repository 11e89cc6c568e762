import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { CustomerRecord } from '../customers/customer-store.js';
import type { GatewayDeps } from '../deps.js';
import { selfUsage } from './self-usage.js';
import { SelfUsageSchema } from './usage-schema.js';

/**
 * GET /v1/usage: the calling key's usage, for the API's own clients. The gate authenticates the
 * key and applies the route's own limit (selfService) instead of the key's windows.
 */
export const usageRoute: FastifyPluginAsyncTypebox<
  Pick<GatewayDeps, 'limiter' | 'history' | 'plans' | 'credits' | 'webhooks' | 'now' | 'customerResolver'>
> = async (app, deps) => {
  app.get(
    '/v1/usage',
    { config: { selfService: true }, schema: { response: { 200: SelfUsageSchema } } },
    async (request) => {
      // The gate admitted the request with its key, and has just resolved the key's customer: the
      // replica's copy answers unless it fell out meanwhile.
      const record = request.apiKey as NonNullable<typeof request.apiKey>;
      const id = record.customerId;
      let customer: CustomerRecord | null = null;
      if (id !== undefined) customer = deps.customerResolver.cached(id) ?? (await deps.customerResolver.fetch(id));
      return selfUsage(deps, record, customer, request.log);
    },
  );
};
