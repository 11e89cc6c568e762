/**
 * Changes made to a key by hand (the admin API, the portal, a leak report): each is audited under
 * its own name (api/audit.ts) and sent as the event of that name, with the key as it is now.
 */
export const KEY_CHANGES = [
  'key.created',
  'key.updated',
  'key.rotated',
  'key.revoked',
  'key.ban_lifted',
  'key.leaked',
] as const;

export type KeyChange = (typeof KEY_CHANGES)[number];

/** Changes made to a customer through the admin API: audited and sent under one name, as a key's are. */
export const CUSTOMER_CHANGES = ['customer.created', 'customer.updated', 'customer.deleted'] as const;

export type CustomerChange = (typeof CUSTOMER_CHANGES)[number];

/** What a subscription may listen to; the payload never holds a secret. */
export const WEBHOOK_EVENTS = [
  'key.quota.warning',
  'key.quota.exhausted',
  'key.banned',
  'key.expiring',
  'key.expired',
  ...KEY_CHANGES,
  ...CUSTOMER_CHANGES,
  'credits.low',
  'credits.exhausted',
  'credits.refilled',
  'usage.reported',
] as const;

export type WebhookEventType = (typeof WEBHOOK_EVENTS)[number];

/** The ping sent by POST /admin/webhooks/:id/test: no subscription asks for it, every one gets it. */
export const PING_EVENT = 'webhook.test';

/** The key an event is about: enough to find it, never its secret or hash. */
export interface KeyRef {
  keyId: string;
  plan: string;
  name: string;
  /**
   * The customer the key belongs to, when it belongs to one: a receiver that bills or mails the
   * customer needs no admin API call to find it. Absent for a key that stands for itself.
   */
  customerId?: string;
}

/** What a credit event made outside a request (an admin read or change) says of its customer. */
export interface CustomerRef {
  customerId: string;
  plan: string;
}

/** What a customer event says of its customer: the customer as it is after the change (or was, deleted). */
export interface CustomerEventRef extends CustomerRef {
  name: string;
  /** The id the business knows it by, when it has one. */
  externalId?: string;
}

/** For the quota events: the window that crossed, in the units the key's headers report. */
export interface QuotaData {
  window: 'day' | 'month';
  limit: number;
  used: number;
  /** RFC 3339. */
  resetAt: string;
  /** The threshold crossed, in percent (100 for key.quota.exhausted). */
  threshold: number;
  /**
   * Set for a window of the key's customer, which all its keys share: the event is the
   * customer's (sent once per crossing, whichever key crossed it) and names it in `customerId`.
   */
  scope?: 'customer';
}

/** The body of one delivery, as the receiver gets it. */
export interface WebhookEvent {
  type: WebhookEventType | typeof PING_EVENT;
  /** RFC 3339: when the event happened. */
  timestamp: string;
  data: Record<string, unknown>;
}
