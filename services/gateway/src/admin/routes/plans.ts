import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { errors } from '../../api/error-responses.js';
import { PlansSchema } from '../../api/schemas.js';
import { billableText } from '../../plans/billable.js';
import { LIMIT_FIELDS, WINDOW_NAMES } from '../../plans/plans.js';
import type { AdminRouteOptions } from '../route-options.js';

/** The plans in force (PLANS_FILE or the spec's four) and what each route costs. */
export const planRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions<'plans'>> = async (app, { deps }) => {
  app.get('/admin/plans', { schema: { response: { 200: PlansSchema, ...errors } } }, async () => {
    const { plans, routeCosts, shadow, source } = deps.plans;
    return {
      source,
      shadow,
      plans: [...plans].map(([name, plan]) => {
        let windows: Record<string, number> | null = null;
        if (plan.windows) {
          windows = {};
          for (const window of WINDOW_NAMES) {
            const limit = plan.windows[LIMIT_FIELDS[window]];
            if (limit !== undefined) windows[window] = limit;
          }
        }
        return {
          name,
          windows,
          algorithm: plan.algorithm,
          scopes: [...plan.scopes],
          shadow: shadow || plan.shadow,
          ...(plan.description ? { description: plan.description } : {}),
          ...(plan.price ? { price: plan.price } : {}),
          ...(plan.credits ? { credits: plan.credits } : {}),
          ...(plan.billable ? { billable: billableText(plan.billable) } : {}),
        };
      }),
      routeCosts: Object.fromEntries(routeCosts),
    };
  });
};
