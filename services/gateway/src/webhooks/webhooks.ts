import type { FastifyBaseLogger } from 'fastify';
import type { KeyRecord } from '../keys/key-store.js';
import type { CreditBatch, WindowState } from '../limits/key-limiter.js';
import type { CloudEvent } from '../metering/metering-event.js';
import type { WebhooksConfig } from './config.js';
import { checkWebhookUrl } from './delivery/address-guard.js';
import { Delivery } from './delivery/deliver.js';
import type { DeliveryJob, DeliveryQueue } from './delivery/delivery-queue.js';
import type { WebhookMetrics } from './delivery/metrics.js';
import type { WebhookSender } from './delivery/send.js';
import type { CustomerChange, CustomerRef, KeyChange } from './event-types.js';
import { FanOut } from './fan-out.js';
import { type EventCustomer, KeyEvents, type KeySource } from './intake/key-events.js';
import { Scheduling } from './scheduling.js';
import type { Subscription, WebhookStore } from './subscriptions/webhook-store.js';

export interface WebhooksOptions {
  config: WebhooksConfig;
  store: WebhookStore;
  queue: DeliveryQueue;
  sender: WebhookSender;
  metrics: WebhookMetrics;
  logger: FastifyBaseLogger;
  /** Where the expiry scan finds keys: the key store and API_KEYS_FILE. */
  keys: KeySource;
  now: () => number;
}

/**
 * Events in, deliveries out, as the rest of the gateway sees webhooks: the intake turns what
 * happens to keys into events (intake/key-events.ts), the fan-out queues one delivery per
 * subscribed endpoint (fan-out.ts), the delivery makes each attempt when the queue hands it over
 * (delivery/deliver.ts), and the scheduling says when this replica works (scheduling.ts).
 */
export class Webhooks {
  readonly store: WebhookStore;
  readonly queue: DeliveryQueue;
  private readonly fanOut: FanOut;
  private readonly intake: KeyEvents;
  private readonly delivery: Delivery;
  private readonly scheduling: Scheduling;

  constructor(private readonly options: WebhooksOptions) {
    const { config, store, queue, logger, now } = options;
    this.store = store;
    this.queue = queue;
    this.fanOut = new FanOut(store, queue, logger, now);
    this.intake = new KeyEvents(this.fanOut, options.keys, config.quotaWarningPercents, logger, now);
    this.delivery = new Delivery(options);
    this.scheduling = new Scheduling({
      expiryScanMs: config.expiryScanMs,
      store,
      queue,
      handlers: { deliver: (job, attempt) => this.deliver(job, attempt) },
      scan: () => this.scan(),
      logger,
      now,
    });
  }

  /** After an admitted request (gate/apply-decision.ts): quota events for thresholds it crossed. */
  onAdmitted(record: KeyRecord, windows: readonly WindowState[], cost: number): void {
    this.intake.onAdmitted(record, windows, cost);
  }

  /** After a limiter call on a credit balance: credits.refilled, credits.low, credits.exhausted. */
  onCredits(record: KeyRecord | CustomerRef, batch: CreditBatch, refillAmount: number | null): void {
    this.intake.onCredits(record, batch, refillAmount);
  }

  /** A closed hour's revision (metering/closer.ts): `usage.reported`, with the CloudEvent as the data. */
  usageReported(event: CloudEvent): void {
    void this.fanOut.emitReport('usage.reported', event.id, { ...event });
  }

  /** When a request started a ban (only that one decision carries `started`). */
  onBanned(record: KeyRecord, banEndsAt: number): void {
    this.intake.onBanned(record, banEndsAt);
  }

  /** After an audited change to a key (api/audit.ts): the event of the same name, with the key as it is now. */
  keyChanged(type: KeyChange, keyId: string, fields: Record<string, unknown>): void {
    this.intake.keyChanged(type, keyId, fields);
  }

  /** After an audited change to a customer: the event of the same name. */
  customerChanged(type: CustomerChange, customer: EventCustomer, fields: Record<string, unknown>): void {
    this.intake.customerChanged(type, customer, fields);
  }

  /** The expiry notices due now, each sent once whichever replica's scan finds it first. */
  scan(): Promise<void> {
    return this.intake.scan();
  }

  /** The endpoint rules (WEBHOOKS_ALLOW_INSECURE, WEBHOOKS_ALLOW_PRIVATE) for a URL; throws WebhookUrlError. */
  checkUrl(url: string): Promise<URL> {
    return checkWebhookUrl(url, this.options.config);
  }

  /**
   * POST /admin/webhooks/:id/test: a ping through the queue, like any delivery; one whose call
   * failed is never delivered (FanOut.ping). `bound` caps the wait for the queue at `waitMs`.
   */
  ping(subscription: Subscription, waitMs: number, bound: (queued: Promise<void>) => Promise<void>): Promise<string> {
    // The confirmation outlives every retry of the ping.
    return this.fanOut.ping(subscription, waitMs, this.options.config.retryForMs + 3_600_000, bound);
  }

  /** One attempt; throws RetryDelivery while the retry period lasts. */
  deliver(job: DeliveryJob, attempt: number): Promise<void> {
    return this.delivery.deliver(job, attempt);
  }

  /** Deliveries, and the expiry scan every WEBHOOKS_EXPIRY_SCAN_SECONDS (one replica per round). */
  start(): Promise<void> {
    return this.scheduling.start();
  }

  /** Deliveries on this replica, once an endpoint exists (scheduling.ts). */
  startWorking(): Promise<void> {
    return this.scheduling.startWorking();
  }

  async close(): Promise<void> {
    await this.scheduling.stop();
    await this.queue.close();
    await this.options.sender.close();
  }
}
