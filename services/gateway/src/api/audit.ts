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

const CUSTOMER_ACTIONS = [
  'customer.create',
  'customer.update',
  'customer.delete',
  'customer.credits',
  'customer.portal-session',
] as const;

/** What an operator does to a customer through the admin API (a portal session: a sign-in link made for it). */
export type CustomerAction = (typeof CUSTOMER_ACTIONS)[number];

/** A change by hand to a lone key's credits: audited under the key, but not a key event (credits have their own). */
type KeyCreditAction = 'key.credits';

type Action = AdminAction | WebhookAction | CustomerAction | KeyCreditAction;

function isWebhookAction(action: Action): action is WebhookAction {
  return (WEBHOOK_ACTIONS as readonly string[]).includes(action);
}

function isCustomerAction(action: Action): action is CustomerAction {
  return (CUSTOMER_ACTIONS as readonly string[]).includes(action);
}

/**
 * One audit line and one count per change; the line names fields, never a secret. A change to a
 * key (named by keyId) is also an event for the webhook endpoints subscribed to it; a change to
 * an endpoint (named by webhookId) or a customer (customerId) is not.
 */
export function audit(
  deps: Pick<GatewayDeps, 'metrics' | 'webhooks'>,
  log: FastifyBaseLogger,
  action: Action,
  id: string,
  fields: Record<string, unknown> = {},
  /** A key change a customer made in the portal, not an operator: the line names the customer as actor. */
  by?: { customerId: string },
): void {
  deps.metrics.adminActions.inc({ action });
  if (isWebhookAction(action)) {
    log.info({ audit: action, webhookId: id, ...fields }, `admin: ${action} ${id}`);
    return;
  }
  if (isCustomerAction(action)) {
    log.info({ audit: action, customerId: id, ...fields }, `admin: ${action} ${id}`);
    return;
  }
  if (action === 'key.credits') {
    log.info({ audit: action, keyId: id, ...fields }, `admin: ${action} ${id}`);
    return;
  }
  if (by) log.info({ audit: action, keyId: id, actor: by, ...fields }, `portal: ${action} ${id} by ${by.customerId}`);
  else log.info({ audit: action, keyId: id, ...fields }, `admin: ${action} ${id}`);
  deps.webhooks.keyAction(action, id, fields);
}
