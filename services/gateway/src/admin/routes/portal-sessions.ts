import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { audit } from '../../api/audit.js';
import { CustomerIdParams } from '../../api/customer-schemas.js';
import { errors } from '../../api/error-responses.js';
import { findCustomer, iso } from '../../api/shared.js';
import { LINK_TTL_MS, newSecret, PORTAL_ENTRY } from '../../customers/portal-session-store.js';
import type { AdminRouteOptions } from '../route-options.js';

const PortalSessionSchema = Type.Object({
  url: Type.String({ format: 'uri' }),
  expiresAt: Type.String({ format: 'date-time' }),
});

/**
 * A sign-in link to the portal for one customer, as Stripe's billing portal makes them: the
 * operator's application asks for it when its user wants the portal, and sends the user there.
 * The link works once, within LINK_TTL_MS; visiting it gives the browser a session.
 */
export const portalSessionRoutes: FastifyPluginAsyncTypebox<
  AdminRouteOptions<'customerStore' | 'portalSessions' | 'metrics' | 'webhooks' | 'now'> & { portalUrl: string }
> = async (app, { deps, portalUrl }) => {
  app.post(
    '/admin/customers/:id/portal-sessions',
    { schema: { params: CustomerIdParams, response: { 201: PortalSessionSchema, ...errors } } },
    async (request, reply) => {
      const customer = await findCustomer(deps, request.params.id);
      const secret = newSecret();
      const expiresAt = deps.now() + LINK_TTL_MS;
      await deps.portalSessions.putLink(secret, customer.id, expiresAt);
      audit(deps, request.log, 'portal_session.created', { customer }, { expiresAt: iso(expiresAt) });
      return reply.code(201).send({ url: `${portalUrl}${PORTAL_ENTRY}?token=${secret}`, expiresAt: iso(expiresAt) });
    },
  );
};
