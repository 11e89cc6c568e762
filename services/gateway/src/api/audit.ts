import type { FastifyBaseLogger } from 'fastify';
import type { CustomerRecord } from '../customers/customer-store.js';
import type { GatewayDeps } from '../deps.js';
import {
  CUSTOMER_CHANGES,
  type CustomerChange,
  type CustomerEventRef,
  KEY_CHANGES,
  type KeyChange,
} from '../webhooks/event-types.js';

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

/** A customer as its audit line and its event name it. */
type AuditedCustomer = Pick<CustomerRecord, 'id' | 'name' | 'plan' | 'externalId'>;

/** What a change is about; the audit line names it by this field (a customer by `customerId`). */
type Subject = { keyId: string } | { customer: AuditedCustomer } | { webhookId: string };

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
  subject: { customer: AuditedCustomer },
  fields?: Record<string, unknown>,
): void;
export function audit(
  deps: Deps,
  log: FastifyBaseLogger,
  action: 'credits.adjusted',
  subject: { keyId: string } | { customer: AuditedCustomer },
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
    deps.webhooks.customerChanged(action, customerRef(subject.customer), fields);
  }
}

function isKeyChange(action: AuditAction): action is KeyChange {
  return (KEY_CHANGES as readonly string[]).includes(action);
}

function isCustomerChange(action: AuditAction): action is CustomerChange {
  return (CUSTOMER_CHANGES as readonly string[]).includes(action);
}

function customerRef(customer: AuditedCustomer): CustomerEventRef {
  return {
    customerId: customer.id,
    plan: customer.plan,
    name: customer.name,
    ...(customer.externalId !== undefined ? { externalId: customer.externalId } : {}),
  };
}
