import type { FastifyBaseLogger } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { CUSTOMER_CHANGES, type CustomerChange, KEY_CHANGES, type KeyChange } from '../webhooks/event-types.js';
import type { EventCustomer } from '../webhooks/intake/key-events.js';

/** Changes to a webhook endpoint: audited, never events (an endpoint is not told of itself). */
type WebhookChange = 'webhook.created' | 'webhook.updated' | 'webhook.rotated' | 'webhook.deleted' | 'webhook.tested';

/**
 * One vocabulary for every change made by hand, `<subject>.<what happened>`: the audit line's
 * `audit` field, the `action` label of gateway_admin_actions_total and, for a key or a customer,
 * the webhook event sent (webhooks/event-types.ts). `credits.adjusted` (a top-up, grant or
 * adjustment of a customer's or a lone key's balance) sends the `credits.*` events its effect
 * calls for instead; `portal_session.created` is a sign-in link made for a customer.
 */
export type AuditAction = KeyChange | CustomerChange | WebhookChange | 'credits.adjusted' | 'portal_session.created';

/** What a change is about; the audit line names it by this field (a customer by `customerId`). */
type Subject = { keyId: string } | { customer: EventCustomer } | { webhookId: string };

/** A key change a customer made in the portal, not an operator: the line names the customer as actor. */
type Actor = { customerId: string };

type Deps = Pick<GatewayDeps, 'metrics' | 'webhooks'>;

/**
 * One audit line and one count per change; the line names fields, never a secret. A change to a
 * key or a customer is also the event of the same name for the endpoints subscribed to it.
 */
export function audit(
  deps: Deps,
  log: FastifyBaseLogger,
  action: KeyChange,
  subject: { keyId: string },
  fields?: Record<string, unknown>,
  by?: Actor,
): void;
export function audit(
  deps: Deps,
  log: FastifyBaseLogger,
  action: CustomerChange | 'portal_session.created',
  subject: { customer: EventCustomer },
  fields?: Record<string, unknown>,
): void;
export function audit(
  deps: Deps,
  log: FastifyBaseLogger,
  action: 'credits.adjusted',
  subject: { keyId: string } | { customer: EventCustomer },
  fields?: Record<string, unknown>,
): void;
export function audit(
  deps: Deps,
  log: FastifyBaseLogger,
  action: WebhookChange,
  subject: { webhookId: string },
  fields?: Record<string, unknown>,
): void;
export function audit(
  deps: Deps,
  log: FastifyBaseLogger,
  action: AuditAction,
  subject: Subject,
  fields: Record<string, unknown> = {},
  by?: Actor,
): void {
  deps.metrics.adminActions.inc({ action });
  const named = 'customer' in subject ? { customerId: subject.customer.id } : subject;
  const id = Object.values(named)[0];
  if (by) log.info({ audit: action, ...named, actor: by, ...fields }, `portal: ${action} ${id} by ${by.customerId}`);
  else log.info({ audit: action, ...named, ...fields }, `admin: ${action} ${id}`);
  if ('keyId' in subject && isKeyChange(action)) deps.webhooks.keyChanged(action, subject.keyId, fields);
  if ('customer' in subject && isCustomerChange(action)) {
    deps.webhooks.customerChanged(action, subject.customer, fields);
  }
}

function isKeyChange(action: AuditAction): action is KeyChange {
  return (KEY_CHANGES as readonly string[]).includes(action);
}

function isCustomerChange(action: AuditAction): action is CustomerChange {
  return (CUSTOMER_CHANGES as readonly string[]).includes(action);
}
