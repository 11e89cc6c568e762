/*
 * What the admin API's document says of each operation in words: its id, summary, description and tag. The
 * schemas, parameters and answers come from the routes themselves (reference.ts); only the words
 * are kept here, in one table, so that the route files stay about what they do.
 * tests/admin-openapi.test.ts fails for a route without a row here, and for a row without a route.
 */

interface OperationWords {
  operationId: string;
  summary: string;
  description: string;
  tags: [string];
}

/** The document's tags, in the order the page lists them. */
export const ADMIN_TAGS = [
  { name: 'keys', description: 'API keys: create, list, change, rotate and revoke' },
  { name: 'usage', description: 'Live windows, usage history and the busiest keys and customers' },
  { name: 'bans', description: 'Keys banned for ignoring their 429s' },
  { name: 'plans', description: 'The plans in force (PLANS_FILE), with their prices and credit terms' },
  { name: 'regions', description: 'Limits across regions over NATS JetStream: the regions seen, partitions, shares' },
  { name: 'customers', description: 'The accounts above the keys, sharing their windows and credits' },
  { name: 'credits', description: 'Prepaid credits: balances, the ledger, top-ups, grants and adjustments' },
  { name: 'billing', description: 'Invoice previews and the metering export for OpenMeter and Stripe' },
  { name: 'portal', description: "Sign-in links to the customers' portal" },
  { name: 'webhooks', description: 'Webhook endpoints and their deliveries' },
] as const;

type Tag = (typeof ADMIN_TAGS)[number]['name'];

const row = (operationId: string, tag: Tag, summary: string, description: string): OperationWords => ({
  operationId,
  summary,
  description,
  tags: [tag],
});

/** By `METHOD /url` as fastify has the route (`:id`, not `{id}`). */
export const ADMIN_OPERATIONS: Readonly<Record<string, OperationWords>> = {
  'POST /admin/keys': row(
    'createKey',
    'keys',
    'Create a key, on a plan or for a customer (its plan)',
    "The plaintext key is in this answer only; the store keeps its SHA-256. `plan` must be in force (GET /admin/plans), or `customerId` puts the key on its customer's plan. docs/keys-and-plans.md.",
  ),
  'GET /admin/keys': row(
    'listKeys',
    'keys',
    'List keys, newest first, paged and filtered',
    'A page of stored and `API_KEYS_FILE` keys; pass `next` as `after` for the next one. Filters are answered on an index. Never a key or its hash.',
  ),
  'GET /admin/keys/:id': row(
    'getKey',
    'keys',
    'Show a key',
    "The key as it is in force: its limits over its plan's, its scopes, its customer or credit terms, and its ban when the limiter can say.",
  ),
  'PATCH /admin/keys/:id': row(
    'updateKey',
    'keys',
    "Change a key's plan, limits, scopes, addresses, name, expiry, customer or credit terms",
    "Only the fields given change; a plan change drops the key's own limits. A key from `API_KEYS_FILE` or a revoked key: 409.",
  ),
  'DELETE /admin/keys/:id': row(
    'revokeKey',
    'keys',
    'Revoke a key',
    'The key answers 401 from now on, on every replica. Repeating it is safe; a key from `API_KEYS_FILE`: 409.',
  ),
  'POST /admin/keys/:id/rotate': row(
    'rotateKey',
    'keys',
    'Rotate a key: a new secret, the old one valid for a grace period',
    'A new plaintext key, shown once; the previous one keeps working for `gracePeriodSeconds`. Safe to repeat under one `Idempotency-Key`.',
  ),
  'GET /admin/keys/:id/usage': row(
    'getKeyUsage',
    'usage',
    "A key's live windows, ban and refusals",
    'What the key used in each of its windows and when each resets; a key of a customer also shows the windows it shares.',
  ),
  'GET /admin/keys/:id/usage/history': row(
    'getKeyUsageHistory',
    'usage',
    "A key's usage by hour or day, JSON or CSV",
    'Admitted, refused, forbidden, billed units and upstream failures per hour or UTC day; `period` for this or the previous month, `format=csv` for a file.',
  ),
  'GET /admin/usage': row(
    'getTopUsage',
    'usage',
    'The busiest keys, customers and plans over a window',
    'Totals over the last hours or days (`window`, e.g. 24h or 7d), by plan, by hour, and the busiest keys and customers by `sort`.',
  ),
  'DELETE /admin/keys/:id/ban': row(
    'liftKeyBan',
    'bans',
    "Lift a key's ban",
    "Ends the key's ban now, on every replica; nothing else changes.",
  ),
  'GET /admin/bans': row(
    'listBans',
    'bans',
    'The bans in force, those ending first',
    "Every ban in force is counted; the first `limit` are listed, those that end first, with the key's name and customer.",
  ),
  'GET /admin/regions': row(
    'listRegions',
    'regions',
    'The regions this one hears, and the shares it enforces',
    'Each other region heard since start, its last sync age and whether it is partitioned (not heard for `REGION_STALE_MS`); the share in force. 404 with `NATS_URL` unset, 503 while NATS cannot be reached. docs/regions.md.',
  ),
  'GET /admin/plans': row(
    'listPlans',
    'plans',
    'The plans in force and the route costs',
    "Where the plans come from (built in or `PLANS_FILE`), each plan's windows, scopes, price and credit terms, and the route costs.",
  ),
  'POST /admin/customers': row(
    'createCustomer',
    'customers',
    'Create a customer on a plan',
    "A customer's keys share its windows, credits and bill. `externalId` is its id in the billing system (Stripe's customer id for the meter events). docs/customers.md.",
  ),
  'GET /admin/customers': row(
    'listCustomers',
    'customers',
    'List customers, paged and filtered',
    'A page of customers; pass `next` as `after` for the next one. Filters by name start, plan and externalId.',
  ),
  'GET /admin/customers/:id': row(
    'getCustomer',
    'customers',
    'Show a customer',
    'The customer, its plan and limits in force, its billing calendar and credit terms.',
  ),
  'PATCH /admin/customers/:id': row(
    'updateCustomer',
    'customers',
    "Change a customer's name, plan, limits, billing calendar, externalId, metadata or credit terms",
    "Only the fields given change; a plan change moves the keys that follow the customer's plan.",
  ),
  'DELETE /admin/customers/:id': row(
    'deleteCustomer',
    'customers',
    'Delete a customer (with live keys: only with revokeKeys=true)',
    'A customer with live keys is refused with 409 unless `revokeKeys=true`, which revokes them first. One in `API_KEYS_FILE`: 409.',
  ),
  'GET /admin/customers/:id/usage': row(
    'getCustomerUsage',
    'usage',
    "A customer's live shared windows",
    "What all the customer's keys used together in each shared window, and when each resets in its calendar.",
  ),
  'GET /admin/customers/:id/usage/history': row(
    'getCustomerUsageHistory',
    'usage',
    "A customer's usage by hour, day or billing period, JSON or CSV",
    "The customer's own hours summed by its local hour, day or billing period (`period`); `format=csv` for a file.",
  ),
  'GET /admin/customers/:id/credits': row(
    'getCustomerCredits',
    'credits',
    "A customer's credit terms and balance",
    "The terms in force (its own, else its plan's; null for none), the balance and the next refill. docs/credits.md.",
  ),
  'GET /admin/customers/:id/credits/ledger': row(
    'getCustomerCreditLedger',
    'credits',
    "A customer's credit ledger, newest first",
    'Every change of the balance: top-ups, grants, adjustments, refills, hourly spend and refunds, newest first, paged.',
  ),
  'POST /admin/customers/:id/credits': row(
    'changeCustomerCredits',
    'credits',
    "Top up, grant or adjust a customer's credits",
    'A `topup` (default) or `grant` adds a positive amount; an `adjustment` may take some away, never below zero (409). Safe to repeat under one `Idempotency-Key`.',
  ),
  'GET /admin/keys/:id/credits': row(
    'getKeyCredits',
    'credits',
    "A lone key's credit terms and balance",
    "As a customer's, for a key without a customer; a key of a customer spends its customer's: 409 naming the customer's route.",
  ),
  'GET /admin/keys/:id/credits/ledger': row(
    'getKeyCreditLedger',
    'credits',
    "A lone key's credit ledger, newest first",
    "As a customer's ledger, for a key without a customer; a key of a customer: 409.",
  ),
  'POST /admin/keys/:id/credits': row(
    'changeKeyCredits',
    'credits',
    "Top up, grant or adjust a lone key's credits",
    "As a customer's, for a key without a customer; a key of a customer: 409. Safe to repeat under one `Idempotency-Key`.",
  ),
  'GET /admin/customers/:id/invoice-preview': row(
    'getCustomerInvoicePreview',
    'billing',
    "A customer's billing period under its plan's price, JSON or CSV",
    'The base fee, included units, overage, credits spent and total of this (`current`) or the `previous` billing period, in integer minor units; 409 for a plan without a price. docs/billing.md.',
  ),
  'GET /admin/keys/:id/invoice-preview': row(
    'getKeyInvoicePreview',
    'billing',
    "A lone key's UTC month under its plan's price, JSON or CSV",
    "As a customer's preview, over the key's UTC month; a key of a customer is billed as its customer: 409.",
  ),
  'GET /admin/metering/events': row(
    'listMeteringEvents',
    'billing',
    'Closed hours as CloudEvents (OpenMeter) or Stripe meter events',
    "Each closed hour's billable units per customer (or lone key) and route, in the order reported; revisions carry a `delta`. Resume with `after`. docs/metering.md.",
  ),
  'POST /admin/customers/:id/portal-sessions': row(
    'createPortalSession',
    'portal',
    'A one-time sign-in link to the portal for a customer',
    'The link signs the customer in once, within its `expiresAt`; send the customer there. docs/portal.md.',
  ),
  'POST /admin/webhooks': row(
    'createWebhook',
    'webhooks',
    'Add a webhook endpoint (its signing secret shown once)',
    'The signing secret is in this answer only. The URL must be `https://` to a public address (docs/webhooks.md). Safe to repeat under one `Idempotency-Key`.',
  ),
  'GET /admin/webhooks': row(
    'listWebhooks',
    'webhooks',
    'List webhook endpoints',
    'Every endpoint, without its secret.',
  ),
  'GET /admin/webhooks/:id': row(
    'getWebhook',
    'webhooks',
    'Show a webhook endpoint',
    'The endpoint, its events, and until when a previous secret also signs.',
  ),
  'PATCH /admin/webhooks/:id': row(
    'updateWebhook',
    'webhooks',
    "Change an endpoint's URL, events or description",
    'Only the fields given change; the secret stays.',
  ),
  'DELETE /admin/webhooks/:id': row(
    'deleteWebhook',
    'webhooks',
    'Remove a webhook endpoint',
    'No event is sent to it from now on.',
  ),
  'POST /admin/webhooks/:id/rotate': row(
    'rotateWebhookSecret',
    'webhooks',
    "Rotate an endpoint's signing secret (the previous one signs for a while)",
    'A new secret, shown once; deliveries are signed with both until `previousSecretExpiresAt`.',
  ),
  'POST /admin/webhooks/:id/test': row(
    'pingWebhook',
    'webhooks',
    'Send an endpoint a ping event',
    'Queues a `ping` event to the endpoint; its attempt shows in its deliveries.',
  ),
  'GET /admin/webhooks/:id/deliveries': row(
    'listWebhookDeliveries',
    'webhooks',
    "An endpoint's latest delivery attempts",
    'The latest attempts to deliver to the endpoint, with their answers.',
  ),
};

export function operationOf(method: string, url: string): OperationWords | undefined {
  return ADMIN_OPERATIONS[`${method} ${url}`];
}
