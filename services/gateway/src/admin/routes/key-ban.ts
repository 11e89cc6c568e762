import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { audit } from '../../api/audit.js';
import { errors } from '../../api/error-responses.js';
import { KeyIdParams } from '../../api/schemas.js';
import { findKey } from '../../api/shared.js';
import { unavailable } from '../../api/store-unavailable.js';
import type { AdminRouteOptions } from '../route-options.js';

/** Lifting a key's ban, on every replica: the shared limiter, this one's memory, the others by event. */
export const keyBanRoutes: FastifyPluginAsyncTypebox<
  AdminRouteOptions<'keyStore' | 'keyResolver' | 'limiter' | 'events' | 'metrics' | 'webhooks'>
> = async (app, { deps }) => {
  app.delete(
    '/admin/keys/:id/ban',
    { schema: { params: KeyIdParams, response: { 204: Type.Null(), ...errors } } },
    async (request, reply) => {
      const { record } = await findKey(deps, request.params.id);
      try {
        await deps.limiter.liftBan(record.id, record.customerId);
      } catch (err) {
        request.log.error({ err }, 'cannot lift ban');
        throw unavailable('rate_limiter_unavailable', 'Cannot reach the rate limiter to lift the ban');
      }
      await deps.events.publish({ type: 'ban-lifted', id: record.id }).catch((err) => {
        request.log.warn({ err }, 'ban-lift event not published');
      });
      audit(deps, request.log, 'key.ban_lifted', { keyId: record.id });
      return reply.code(204).send(null);
    },
  );
};
