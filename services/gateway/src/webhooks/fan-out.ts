import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { DeliveryJob, DeliveryQueue } from './delivery/delivery-queue.js';
import { type CustomerRef, type KeyRef, PING_EVENT, type WebhookEvent, type WebhookEventType } from './event-types.js';
import type { QueueFence, Subscription, WebhookStore } from './subscriptions/webhook-store.js';

/** Sends an event only once across the replicas: the first caller within `ttlMs` takes the marker. */
export interface Once {
  marker: string;
  ttlMs: number;
}

/**
 * One event in, one queued delivery per subscribed endpoint out, deduplicated across the replicas
 * by marker. Nothing here throws at its callers: a lost event is logged, never a failed request.
 */
export class FanOut {
  constructor(
    private readonly store: WebhookStore,
    private readonly queue: DeliveryQueue,
    private readonly logger: FastifyBaseLogger,
    private readonly now: () => number,
  ) {}

  /**
   * Queues the event for every endpoint subscribed to it. With a marker, only the first caller
   * anywhere within `ttlMs` does: the others (replicas that saw the same crossing) send nothing.
   */
  async emit(type: WebhookEventType, key: KeyRef | CustomerRef, data: object, once?: Once): Promise<void> {
    try {
      if (once && !(await this.store.once(once.marker, once.ttlMs))) return;
      // A deduplicated event keeps one id everywhere, so a receiver can drop a repeat by webhook-id.
      await this.queueAll(type, once ? `msg_${once.marker}` : `msg_${randomUUID()}`, { ...key, ...data });
    } catch (err) {
      const about = 'keyId' in key ? { keyId: key.keyId } : { customerId: key.customerId };
      this.logger.warn({ err, event: type, ...about }, 'webhooks: event not queued');
    }
  }

  /**
   * A metering report (`usage.reported`): the CloudEvent as the data and its id in the webhook-id
   * (`msg_<id>`), the same for the same subject, hour and revision. Not deduplicated here: the
   * closer hands each revision over on the one replica that appended it (metering/closer.ts).
   */
  async emitReport(type: WebhookEventType, eventId: string, data: Record<string, unknown>): Promise<void> {
    try {
      await this.queueAll(type, `msg_${eventId}`, data);
    } catch (err) {
      this.logger.warn({ err, event: type, eventId }, 'webhooks: event not queued');
    }
  }

  /** One delivery of the event per endpoint subscribed to its type. */
  private async queueAll(type: WebhookEventType, eventId: string, data: Record<string, unknown>): Promise<void> {
    const subscriptions = (await this.store.list()).filter((s) => s.events.includes(type));
    if (subscriptions.length === 0) return;
    const now = this.now();
    const event: WebhookEvent = { type, timestamp: new Date(now).toISOString(), data };
    await Promise.all(subscriptions.map((s) => this.enqueue(s.id, eventId, event, now)));
  }

  /**
   * POST /admin/webhooks/:id/test: a ping through the queue, like any delivery, but fenced: a ping
   * whose request failed (a 503) is never delivered, even when its queuing lands once Redis
   * answers (WebhookStore.fencedQueue). `bound` caps the wait for the queue (`waitMs` at most).
   */
  async ping(
    subscription: Subscription,
    waitMs: number,
    ttlMs: number,
    bound: (queued: Promise<void>) => Promise<void>,
  ): Promise<string> {
    const now = this.now();
    const eventId = `msg_${randomUUID()}`;
    const event: WebhookEvent = {
      type: PING_EVENT,
      timestamp: new Date(now).toISOString(),
      data: { webhookId: subscription.id },
    };
    await this.store.fencedQueue(`ping:${eventId}`, waitMs, ttlMs, (fence) =>
      bound(this.enqueue(subscription.id, eventId, event, now, fence)),
    );
    return eventId;
  }

  private async enqueue(
    subscriptionId: string,
    eventId: string,
    event: WebhookEvent,
    now: number,
    fence?: QueueFence | null,
  ): Promise<void> {
    const job: DeliveryJob = { subscriptionId, eventId, event, enqueuedAt: now, ...(fence ? { fence } : {}) };
    // BullMQ ids may not hold ':'.
    await this.queue.add(job, `${eventId}.${subscriptionId}`.replaceAll(':', '_'));
  }
}
