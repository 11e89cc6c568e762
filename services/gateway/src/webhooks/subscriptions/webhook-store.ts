import type { WebhookEventType } from '../event-types.js';

/** An endpoint and what it listens to. `secret` signs deliveries; only create and rotate show it. */
export interface Subscription {
  id: string;
  url: string;
  events: WebhookEventType[];
  description: string;
  /** `whsec_…` (Standard Webhooks). */
  secret: string;
  /** After a rotation, the old secret also signs until `expiresAt`, so receivers can switch over. */
  previousSecret?: { secret: string; expiresAt: string };
  createdAt: string;
  updatedAt?: string;
  /** Set when a delivery ran out of retries; cleared by the next successful one. */
  failing?: { since: string; reason: string };
}

/** One HTTP attempt of one delivery. */
export interface DeliveryAttempt {
  /** RFC 3339: when the attempt started. */
  at: string;
  /** The webhook-id (the same on every attempt of one delivery). */
  eventId: string;
  event: string;
  /** 1 for the first try. */
  attempt: number;
  /** The endpoint's status, or null when none came (refused, timed out, address forbidden). */
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  /** delivered (2xx), retrying (another attempt is scheduled) or failed (retries exhausted). */
  outcome: 'delivered' | 'retrying' | 'failed';
}

/**
 * What a fenced delivery (a ping) carries: the marker its queuing is confirmed under, and the
 * deadline (µs on Redis's clock) after which that confirmation can no longer be written.
 */
export interface QueueFence {
  marker: string;
  deadlineUs: number;
}

/** A fenced delivery's standing: confirmed (make it), void (never confirmed, and never will be: drop it) or pending. */
export type FenceState = 'confirmed' | 'void' | 'pending';

/** Where subscriptions and their attempts live: Redis shared by the replicas, or this process. */
export interface WebhookStore {
  readonly kind: string;
  /** Inserts or replaces. */
  put(subscription: Subscription): Promise<void>;
  /** Inserts unless one with its id exists, which it leaves as it is: false then. */
  add(subscription: Subscription): Promise<boolean>;
  get(id: string): Promise<Subscription | null>;
  list(): Promise<Subscription[]>;
  /** False when there was none. Its attempts go too. */
  remove(id: string): Promise<boolean>;
  /** Keeps the latest MAX_ATTEMPTS per subscription. */
  recordAttempt(id: string, attempt: DeliveryAttempt): Promise<void>;
  /** Newest first. */
  attempts(id: string): Promise<DeliveryAttempt[]>;
  /**
   * True for the first caller with this marker within `ttlMs`, false for every other, on every
   * replica: what makes an event that several replicas see at once go out once.
   */
  once(marker: string, ttlMs: number): Promise<boolean>;
  /**
   * Queues a delivery that must not be made unless its request succeeded: `queue` adds it, carrying
   * the fence it is given (null: this store needs none), then the marker is confirmed, fenced
   * (redis/fenced-writes.ts). A call that rejects has confirmed nothing and never will, so the
   * delivery, if its queuing lands later, is dropped (fenceState). `waitMs`: how long `queue` may
   * take; the confirmation lasts `ttlMs`.
   */
  fencedQueue(
    marker: string,
    waitMs: number,
    ttlMs: number,
    queue: (fence: QueueFence | null) => Promise<void>,
  ): Promise<void>;
  /** Where a fenced delivery stands (see fencedQueue). */
  fenceState(fence: QueueFence): Promise<FenceState>;
}

export const MAX_ATTEMPTS = 100;
