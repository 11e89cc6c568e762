import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { errors } from '../../api/error-responses.js';
import { type LeakDeps, LeakHandler } from '../../api/leak-handler.js';
import { LeakListQuery, LeakListSchema, LeakReportSchema, LeakSchema } from '../../api/leak-schemas.js';
import { hashApiKey } from '../../keys/api-key.js';
import type { LeaksConfig } from '../../leaks/config.js';
import type { AdminRouteOptions } from '../route-options.js';

/**
 * Leaks reported by hand (a key found in a ticket or a log), acted on as the receiver's are
 * (api/leak-handler.ts), and the list of proven leaks, whoever reported them.
 */
export const leakRoutes: FastifyPluginAsyncTypebox<
  AdminRouteOptions<keyof LeakDeps> & {
    leaks: Pick<LeaksConfig, 'graceSeconds' | 'response' | 'byPlan' | 'byCustomer'>;
  }
> = async (app, { deps, leaks }) => {
  const handler = new LeakHandler(deps, leaks);

  app.post(
    '/admin/leaks',
    { schema: { body: LeakReportSchema, response: { 201: LeakSchema, ...errors } } },
    async (request, reply) => {
      const { key, sha256, source, url } = request.body;
      if ((key === undefined) === (sha256 === undefined)) {
        throw new ApiError(400, 'invalid_request', 'body: give the leaked key as exactly one of key or sha256');
      }
      const outcome = await handler.report(
        {
          sha256: sha256 ?? hashApiKey(key ?? ''),
          reporter: 'manual',
          source,
          ...(url !== undefined ? { url } : {}),
        },
        request.log,
      );
      // An operator may be told: what the receiver keeps from scanners, it need not keep here.
      if (outcome.label === 'false_positive') {
        throw new ApiError(
          404,
          'not_found',
          'No key takes this secret now (unknown, revoked, expired or past its grace)',
        );
      }
      return reply.code(201).send(outcome.leak);
    },
  );

  app.get(
    '/admin/leaks',
    { schema: { querystring: LeakListQuery, response: { 200: LeakListSchema, ...errors } } },
    // Redis away: 503 with Retry-After, as every admin route (store-unavailable.ts).
    async (request) => ({ items: await deps.leaks.list(request.query.limit ?? 50) }),
  );
};
