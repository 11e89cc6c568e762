import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { audit } from '../../api/audit.js';
import { errors } from '../../api/error-responses.js';
import { findWebhook } from '../../api/shared.js';
import { within } from '../../api/store-unavailable.js';
import { DeliveryAttemptsSchema, PingSchema, WebhookIdParams } from '../../api/webhook-schemas.js';
import type { AdminRouteOptions } from '../route-options.js';

/** The longest a ping waits for the delivery queue before its request gets a 503. */
const QUEUE_WAIT_MS = 5_000;

/** A webhook endpoint's deliveries: a ping through the queue, and the latest attempts. */
export const webhookDeliveryRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions<'webhooks' | 'metrics'>> = async (
  app,
  { deps },
) => {
  const { webhooks } = deps;

  app.post(
    '/admin/webhooks/:id/test',
    { schema: { params: WebhookIdParams, response: { 202: PingSchema, ...errors } } },
    async (request, reply) => {
      const subscription = await findWebhook(deps, request.params.id);
      // The queue's connection waits out a Redis outage instead of failing: the request may not.
      // A ping answered 503 is never delivered, even if its queuing lands later (FanOut.ping).
      const eventId = await webhooks.ping(subscription, QUEUE_WAIT_MS, (queued) =>
        within(QUEUE_WAIT_MS, 'The webhook delivery queue', queued),
      );
      audit(deps, request.log, 'webhook.tested', { webhookId: subscription.id }, { eventId });
      return reply.code(202).send({ id: subscription.id, eventId });
    },
  );

  app.get(
    '/admin/webhooks/:id/deliveries',
    { schema: { params: WebhookIdParams, response: { 200: DeliveryAttemptsSchema, ...errors } } },
    async (request) => {
      await findWebhook(deps, request.params.id);
      return webhooks.store.attempts(request.params.id);
    },
  );
};
