import { randomBytes } from 'node:crypto';
import { ApiError, clipped } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyBaseLogger } from 'fastify';
import type { Static } from 'typebox';
import { Type } from 'typebox';
import { WebhookUrlError } from '../../webhooks/delivery/address-guard.js';
import type { Subscription } from '../../webhooks/subscriptions/webhook-store.js';
import { newSigningSecret } from '../../webhooks/webhooks.js';
import { type AdminRouteOptions, errors, idempotentErrors, iso } from '../shared.js';
import { within } from '../store-unavailable.js';
import {
  CreatedWebhookSchema,
  CreateWebhookSchema,
  DeliveryAttemptsSchema,
  PingSchema,
  RotatedWebhookSecretSchema,
  UpdateWebhookSchema,
  WebhookIdParams,
  WebhookViewSchema,
} from '../webhook-schemas.js';

/** The longest a ping waits for the delivery queue before its request gets a 503. */
const QUEUE_WAIT_MS = 5_000;

/** How long a rotated-out secret still signs, so receivers can switch without losing a delivery. */
const PREVIOUS_SECRET_MS = 86_400_000;

type WebhookAction = 'webhook-create' | 'webhook-update' | 'webhook-rotate' | 'webhook-delete' | 'webhook-test';

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

/** Webhook endpoints: create (the secret shown once), list, show, update, delete, rotate, ping, deliveries. */
export const webhookRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions> = async (app, { deps, idempotency }) => {
  const { webhooks } = deps;

  /** Like the key actions' audit (admin/shared.ts): one line naming no secret, one count. */
  function audit(log: FastifyBaseLogger, action: WebhookAction, webhookId: string, fields: object = {}): void {
    deps.metrics.adminActions.inc({ action });
    log.info({ audit: action, webhookId, ...fields }, `admin: ${action} ${webhookId}`);
  }

  async function find(id: string): Promise<Subscription> {
    const found = await webhooks.store.get(id);
    if (!found) throw new ApiError(404, 'not_found', `No webhook with id ${clipped(id)}`);
    return found;
  }

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
          const subscription: Subscription = {
            id: `wh_${randomBytes(12).toString('base64url')}`,
            url: await checkedUrl(body.url),
            events: body.events,
            description: body.description ?? '',
            secret: newSigningSecret(),
            createdAt: iso(deps.now()),
          };
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
        // A write that timed out may still be made once Redis answers: the removal queued behind
        // it takes it back, so a failed create without an Idempotency-Key leaves no endpoint whose
        // secret nobody has.
        undo: async (subscription) => {
          await webhooks.store.remove(subscription.id);
        },
        made: (subscription) =>
          audit(request.log, 'webhook-create', subscription.id, { url: subscription.url, events: subscription.events }),
      }),
  );

  app.get('/admin/webhooks', { schema: { response: { 200: Type.Array(WebhookViewSchema), ...errors } } }, async () =>
    (await webhooks.store.list()).map(view),
  );

  app.get(
    '/admin/webhooks/:id',
    { schema: { params: WebhookIdParams, response: { 200: WebhookViewSchema, ...errors } } },
    async (request) => view(await find(request.params.id)),
  );

  app.patch(
    '/admin/webhooks/:id',
    { schema: { params: WebhookIdParams, body: UpdateWebhookSchema, response: { 200: WebhookViewSchema, ...errors } } },
    async (request) => {
      const current = await find(request.params.id);
      const body = request.body;
      const updated: Subscription = {
        ...current,
        ...(body.url !== undefined ? { url: await checkedUrl(body.url) } : {}),
        ...(body.events !== undefined ? { events: body.events } : {}),
        ...(body.description !== undefined ? { description: body.description } : {}),
        updatedAt: iso(deps.now()),
      };
      await webhooks.store.put(updated);
      audit(request.log, 'webhook-update', updated.id, { changed: Object.keys(body) });
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
      audit(request.log, 'webhook-delete', request.params.id);
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/admin/webhooks/:id/rotate',
    { schema: { params: WebhookIdParams, response: { 200: RotatedWebhookSecretSchema, ...errors } } },
    async (request) => {
      const current = await find(request.params.id);
      const now = deps.now();
      const previousSecretExpiresAt = iso(now + PREVIOUS_SECRET_MS);
      const rotated: Subscription = {
        ...current,
        secret: newSigningSecret(),
        previousSecret: { secret: current.secret, expiresAt: previousSecretExpiresAt },
        updatedAt: iso(now),
      };
      await webhooks.store.put(rotated);
      audit(request.log, 'webhook-rotate', rotated.id, { previousSecretExpiresAt });
      return { id: rotated.id, secret: rotated.secret, previousSecretExpiresAt };
    },
  );

  app.post(
    '/admin/webhooks/:id/test',
    { schema: { params: WebhookIdParams, response: { 202: PingSchema, ...errors } } },
    async (request, reply) => {
      const subscription = await find(request.params.id);
      // The queue's connection waits out a Redis outage instead of failing: the request may not.
      const eventId = await within(QUEUE_WAIT_MS, 'The webhook delivery queue', webhooks.ping(subscription));
      audit(request.log, 'webhook-test', subscription.id, { eventId });
      return reply.code(202).send({ id: subscription.id, eventId });
    },
  );

  app.get(
    '/admin/webhooks/:id/deliveries',
    { schema: { params: WebhookIdParams, response: { 200: DeliveryAttemptsSchema, ...errors } } },
    async (request) => {
      await find(request.params.id);
      return webhooks.store.attempts(request.params.id);
    },
  );
};
