import { randomBytes } from 'node:crypto';
import type { WebhookEventType } from '../event-types.js';
import type { Subscription } from './webhook-store.js';

/** How long a rotated-out secret still signs, so receivers can switch without losing a delivery. */
const PREVIOUS_SECRET_MS = 86_400_000;

/** A Standard Webhooks signing secret: `whsec_` and 32 random bytes in base64. */
function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** A new endpoint with its own id and secret; `url` has passed the endpoint rules already. */
export function newSubscription(
  fields: { url: string; events: WebhookEventType[]; description?: string },
  now: number,
): Subscription {
  return {
    id: `wh_${randomBytes(12).toString('base64url')}`,
    url: fields.url,
    events: fields.events,
    description: fields.description ?? '',
    secret: newSigningSecret(),
    createdAt: new Date(now).toISOString(),
  };
}

/** The endpoint with the fields given changed (`url` checked already), stamped `updatedAt`. */
export function changedSubscription(
  current: Subscription,
  changes: { url?: string; events?: WebhookEventType[]; description?: string },
  now: number,
): Subscription {
  return {
    ...current,
    ...(changes.url !== undefined ? { url: changes.url } : {}),
    ...(changes.events !== undefined ? { events: changes.events } : {}),
    ...(changes.description !== undefined ? { description: changes.description } : {}),
    updatedAt: new Date(now).toISOString(),
  };
}

/** A new secret; the one it replaces still signs for PREVIOUS_SECRET_MS. */
export function rotatedSubscription(current: Subscription, now: number): Subscription {
  return {
    ...current,
    secret: newSigningSecret(),
    previousSecret: { secret: current.secret, expiresAt: new Date(now + PREVIOUS_SECRET_MS).toISOString() },
    updatedAt: new Date(now).toISOString(),
  };
}
