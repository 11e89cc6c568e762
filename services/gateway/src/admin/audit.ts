import type { FastifyBaseLogger } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import type { AdminAction } from '../keys/admin-actions.js';

const WEBHOOK_ACTIONS = [
  'webhook-create',
  'webhook-update',
  'webhook-rotate',
  'webhook-delete',
  'webhook-test',
] as const;

/** What an operator does to a webhook endpoint through the admin API. */
export type WebhookAction = (typeof WEBHOOK_ACTIONS)[number];

function isWebhookAction(action: AdminAction | WebhookAction): action is WebhookAction {
  return (WEBHOOK_ACTIONS as readonly string[]).includes(action);
}

/**
 * One audit line and one count per change; the line names fields, never a secret. A change to a
 * key (named by keyId) is also an event for the webhook endpoints subscribed to it; a change to
 * an endpoint (named by webhookId) is not.
 */
export function audit(
  deps: Pick<GatewayDeps, 'metrics' | 'webhooks'>,
  log: FastifyBaseLogger,
  action: AdminAction | WebhookAction,
  id: string,
  fields: Record<string, unknown> = {},
): void {
  deps.metrics.adminActions.inc({ action });
  if (isWebhookAction(action)) {
    log.info({ audit: action, webhookId: id, ...fields }, `admin: ${action} ${id}`);
    return;
  }
  log.info({ audit: action, keyId: id, ...fields }, `admin: ${action} ${id}`);
  deps.webhooks.keyAction(action, id, fields);
}
