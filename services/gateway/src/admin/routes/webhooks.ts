import { ApiError, clipped } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static } from 'typebox';
import { Type } from 'typebox';
import { audit } from '../../api/audit.js';
import { errors, idempotentErrors } from '../../api/error-responses.js';
import { findWebhook } from '../../api/shared.js';
import {
  CreatedWebhookSchema,
  CreateWebhookSchema,
  RotatedWebhookSecretSchema,
  UpdateWebhookSchema,
  WebhookIdParams,
  WebhookViewSchema,
} from '../../api/webhook-schemas.js';
import { WebhookUrlError } from '../../webhooks/delivery/address-guard.js';
import {
  changedSubscription,
  newSubscription,
  rotatedSubscription,
} from '../../webhooks/subscriptions/subscription-rules.js';
import type { Subscription } from '../../webhooks/subscriptions/webhook-store.js';
import type { AdminRouteOptions } from '../route-options.js';

function view(s: Subscription): Static<typeof WebhookViewSchema> {
  return {
    id: s.id,
    url: s.url,
    events: s.events,
    description: s.description,
    createdAt: s.createdAt,
    ...(s.updatedAt ? { updatedAt: s.updatedAt } : {}),
    ...(s.previousSecret ? { previousSecretExpiresAt: s.previousSecret.expiresAt } : {}),
    ...(s.failing ? { failing: s.failing } : {}),
  };
}

/** Webhook endpoints: create (the secret shown once), list, show, update, delete, rotate (ping and deliveries: webhook-deliveries.ts). */
export const webhookRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions<'webhooks' | 'metrics' | 'now'>> = async (
  app,
  { deps, idempotency },
) => {
  const { webhooks } = deps;

  async function checkedUrl(url: string): Promise<string> {
    try {
      return (await webhooks.checkUrl(url)).href;
    } catch (err) {
      if (err instanceof WebhookUrlError) throw new ApiError(400, 'invalid_request', err.message);
      throw err;
    }
  }

  app.post(
    '/admin/webhooks',
    { schema: { body: CreateWebhookSchema, response: { 201: CreatedWebhookSchema, ...idempotentErrors } } },
    async (request, reply) =>
      idempotency.run(request, reply, {
        plan: async () => {
          const body = request.body;
          const subscription = newSubscription({ ...body, url: await checkedUrl(body.url) }, deps.now());
          return { plan: subscription, status: 201, body: { ...view(subscription), secret: subscription.secret } };
        },
        // Added, not put: a retry must not overwrite what was changed since (a PATCH, a rotation).
        apply: async (subscription) => {
          await webhooks.store.add(subscription);
          // Deliveries start here now, or at the next scan round: the endpoint exists either way.
          await webhooks.startWorking().catch((err: unknown) => {
            request.log.warn({ err }, 'webhooks: deliveries not started yet; the next scan round starts them');
          });
        },
        // The add is fenced: answered 503, it never lands later. Its reply may still be lost after
        // it landed (a connection cut): the removal takes it back, so a failed create without an
        // Idempotency-Key leaves no endpoint whose secret nobody has.
        undo: async (subscription) => {
          await webhooks.store.remove(subscription.id);
        },
        made: (subscription) =>
          audit(
            deps,
            request.log,
            'webhook.created',
            { webhookId: subscription.id },
            {
              url: subscription.url,
              events: subscription.events,
            },
          ),
      }),
  );

  app.get('/admin/webhooks', { schema: { response: { 200: Type.Array(WebhookViewSchema), ...errors } } }, async () =>
    (await webhooks.store.list()).map(view),
  );

  app.get(
    '/admin/webhooks/:id',
    { schema: { params: WebhookIdParams, response: { 200: WebhookViewSchema, ...errors } } },
    async (request) => view(await findWebhook(deps, request.params.id)),
  );

  app.patch(
    '/admin/webhooks/:id',
    { schema: { params: WebhookIdParams, body: UpdateWebhookSchema, response: { 200: WebhookViewSchema, ...errors } } },
    async (request) => {
      const current = await findWebhook(deps, request.params.id);
      const body = request.body;
      const url = body.url === undefined ? undefined : await checkedUrl(body.url);
      const updated = changedSubscription(current, { ...body, url }, deps.now());
      await webhooks.store.put(updated);
      audit(deps, request.log, 'webhook.updated', { webhookId: updated.id }, { changed: Object.keys(body) });
      return view(updated);
    },
  );

  app.delete(
    '/admin/webhooks/:id',
    { schema: { params: WebhookIdParams, response: { 204: Type.Null(), ...errors } } },
    async (request, reply) => {
      // Deliveries already queued for it are dropped when their turn comes.
      if (!(await webhooks.store.remove(request.params.id))) {
        throw new ApiError(404, 'not_found', `No webhook with id ${clipped(request.params.id)}`);
      }
      audit(deps, request.log, 'webhook.deleted', { webhookId: request.params.id });
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/admin/webhooks/:id/rotate',
    { schema: { params: WebhookIdParams, response: { 200: RotatedWebhookSecretSchema, ...errors } } },
    async (request) => {
      const current = await findWebhook(deps, request.params.id);
      const rotated = rotatedSubscription(current, deps.now());
      const previousSecretExpiresAt = rotated.previousSecret!.expiresAt;
      await webhooks.store.put(rotated);
      audit(deps, request.log, 'webhook.rotated', { webhookId: rotated.id }, { previousSecretExpiresAt });
      return { id: rotated.id, secret: rotated.secret, previousSecretExpiresAt };
    },
  );
};
