import type { WebhookEvent } from '../event-types.js';
import type { QueueFence } from '../subscriptions/webhook-store.js';

/** One event for one endpoint; every attempt sends the same body with the same webhook-id. */
export interface DeliveryJob {
  subscriptionId: string;
  /** The webhook-id: receivers use it to drop a repeat. */
  eventId: string;
  event: WebhookEvent;
  /** Epoch ms: retries stop (and the endpoint is marked failing) once WEBHOOKS_RETRY_FOR_SECONDS have passed since. */
  enqueuedAt: number;
  /** A ping's: made only once its queuing is confirmed, dropped if it never can be (WebhookStore.fencedQueue). */
  fence?: QueueFence;
}

/** Thrown by an attempt that failed while its retry period lasts. */
export class RetryDelivery extends Error {}

export interface QueueHandlers {
  /** One attempt (`attempt` 1 for the first); whatever it throws is retried after the backoff. */
  deliver(job: DeliveryJob, attempt: number): Promise<void>;
}

export interface QueueStats {
  /** Deliveries waiting for their first attempt or a retry. */
  depth: number;
  /** Epoch ms of the oldest of them, or null when none waits. */
  oldestEnqueuedAt: number | null;
}

/** Where deliveries wait: durable and shared (BullMQ on the gateway's Redis), or this process. */
export interface DeliveryQueue {
  readonly kind: string;
  /** Adds a delivery unless one with this id is already queued. */
  add(job: DeliveryJob, jobId: string): Promise<void>;
  /** Starts making deliveries on this replica. */
  start(handlers: QueueHandlers): Promise<void>;
  stats(): Promise<QueueStats>;
  /** Stops taking work and waits for the attempts under way. */
  close(): Promise<void>;
}

/** WEBHOOKS_RETRY_BASE_MS and WEBHOOKS_RETRY_MAX_DELAY_MS, and where the jitter comes from. */
export interface RetrySchedule {
  baseMs: number;
  maxMs: number;
  /** Uniform in [0, 1); Math.random unless a test fixes it to see the schedule's bounds. */
  random?: () => number;
}

/**
 * Exponential backoff with jitter: the n-th retry waits base·2^(n-1), capped, then a random part of
 * it off (between half and all of it), so endpoints that failed together are not retried together.
 */
export function retryDelayMs(retry: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const full = Math.min(maxMs, baseMs * 2 ** Math.min(Math.max(retry - 1, 0), 40));
  return Math.max(1, Math.round(full / 2 + (random() * full) / 2));
}
