import { randomBytes, randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { KeyRecord } from '../keys/key-store.js';
import type { WindowState } from '../limits/key-limiter.js';
import type { WebhooksConfig } from './config.js';
import { checkWebhookUrl, WebhookUrlError } from './delivery/address-guard.js';
import type { DeliveryJob, DeliveryQueue } from './delivery/delivery-queue.js';
import { RetryDelivery } from './delivery/delivery-queue.js';
import { signedHeaders, type WebhookSender } from './delivery/send.js';
import type { KeyRef, WebhookEvent, WebhookEventType } from './event-types.js';
import { PING_EVENT } from './event-types.js';
import { expiryNotice } from './intake/expiry-notices.js';
import { quotaCrossings } from './intake/quota-crossings.js';
import type { WebhookMetrics } from './metrics.js';
import type { Subscription, WebhookStore } from './subscriptions/webhook-store.js';

/** Key changes made through the admin API (admin/shared.ts audit), as the events they send. */
const KEY_ACTIONS: Record<string, WebhookEventType> = {
  create: 'key.created',
  update: 'key.updated',
  rotate: 'key.rotated',
  revoke: 'key.revoked',
  unban: 'key.ban_lifted',
};

/** Audit fields an event may carry: what changed, when something ends; never a secret. */
const KEY_ACTION_FIELDS = ['changed', 'expiresAt', 'previousKeyExpiresAt'];

/**
 * How soon a round that failed before deliveries started (endpoints unreadable, the queue not
 * opened: Redis not ready or down) is tried again; doubled each time up to the scan period.
 */
const START_RETRY_MS = 1_000;

/** A Standard Webhooks signing secret: `whsec_` and 32 random bytes in base64. */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

export interface WebhooksOptions {
  config: WebhooksConfig;
  store: WebhookStore;
  queue: DeliveryQueue;
  sender: WebhookSender;
  metrics: WebhookMetrics;
  logger: FastifyBaseLogger;
  /** Where the expiry scan finds keys: the key store and API_KEYS_FILE. */
  keys: { get(id: string): Promise<KeyRecord | null>; list(): Promise<KeyRecord[]> };
  now: () => number;
}

/**
 * Events in, deliveries out: turns what happens to keys into queued deliveries, one per
 * subscribed endpoint, and makes each attempt when the queue hands it over. Nothing here throws
 * at its callers: a lost event is logged, never a failed request.
 */
export class Webhooks {
  readonly store: WebhookStore;
  readonly queue: DeliveryQueue;
  private readonly percents: readonly number[];
  private scanTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private scanning: Promise<void> = Promise.resolve();
  private working: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly options: WebhooksOptions) {
    this.store = options.store;
    this.queue = options.queue;
    this.percents = options.config.quotaWarningPercents;
  }

  /** After an admitted request (gate/apply-decision.ts): quota events for thresholds it crossed. */
  onAdmitted(record: KeyRecord, windows: readonly WindowState[], cost: number): void {
    const crossed = quotaCrossings(windows, cost, this.percents);
    if (!crossed) return;
    const at = this.options.now();
    for (const quota of crossed) {
      const marker = `quota.${record.id}.${quota.window}.${Date.parse(quota.resetAt)}.${quota.threshold}`;
      void this.emit(quota.threshold === 100 ? 'key.quota.exhausted' : 'key.quota.warning', keyRef(record), quota, {
        marker,
        ttlMs: Date.parse(quota.resetAt) - at + 86_400_000,
      });
    }
  }

  /** When a request started a ban (only that one decision carries `started`). */
  onBanned(record: KeyRecord, banEndsAt: number): void {
    void this.emit('key.banned', keyRef(record), { bannedUntil: new Date(banEndsAt).toISOString() });
  }

  /** After an audited admin change to a key: the matching event, with the key as it is now. */
  keyAction(action: string, keyId: string, fields: Record<string, unknown>): void {
    const type = KEY_ACTIONS[action];
    if (!type) return;
    const extra = Object.fromEntries(Object.entries(fields).filter(([k]) => KEY_ACTION_FIELDS.includes(k)));
    void this.options.keys
      .get(keyId)
      .then((record) => this.emit(type, record ? keyRef(record) : { keyId, plan: '', name: '' }, extra))
      .catch((err) => this.options.logger.warn({ err, keyId, event: type }, 'webhooks: event not sent'));
  }

  /**
   * Queues the event for every endpoint subscribed to it. With a marker, only the first caller
   * anywhere within `ttlMs` does: the others (replicas that saw the same crossing) send nothing.
   */
  async emit(
    type: WebhookEventType,
    key: KeyRef,
    data: object,
    once?: { marker: string; ttlMs: number },
  ): Promise<void> {
    try {
      if (once && !(await this.store.once(once.marker, once.ttlMs))) return;
      const subscriptions = (await this.store.list()).filter((s) => s.events.includes(type));
      if (subscriptions.length === 0) return;
      const now = this.options.now();
      const event: WebhookEvent = { type, timestamp: new Date(now).toISOString(), data: { ...key, ...data } };
      // A deduplicated event keeps one id everywhere, so a receiver can drop a repeat by webhook-id.
      const eventId = once ? `msg_${once.marker}` : `msg_${randomUUID()}`;
      await Promise.all(subscriptions.map((s) => this.enqueue(s.id, eventId, event, now)));
    } catch (err) {
      this.options.logger.warn({ err, event: type, keyId: key.keyId }, 'webhooks: event not queued');
    }
  }

  /** The endpoint rules (WEBHOOKS_ALLOW_INSECURE, WEBHOOKS_ALLOW_PRIVATE) for a URL; throws WebhookUrlError. */
  checkUrl(url: string): Promise<URL> {
    return checkWebhookUrl(url, this.options.config);
  }

  /** POST /admin/webhooks/:id/test: a ping through the queue, like any delivery. */
  async ping(subscription: Subscription): Promise<string> {
    const now = this.options.now();
    const eventId = `msg_${randomUUID()}`;
    const event: WebhookEvent = {
      type: PING_EVENT,
      timestamp: new Date(now).toISOString(),
      data: { webhookId: subscription.id },
    };
    await this.enqueue(subscription.id, eventId, event, now);
    return eventId;
  }

  private async enqueue(subscriptionId: string, eventId: string, event: WebhookEvent, now: number): Promise<void> {
    const job: DeliveryJob = { subscriptionId, eventId, event, enqueuedAt: now };
    // BullMQ ids may not hold ':'.
    await this.queue.add(job, `${eventId}.${subscriptionId}`.replaceAll(':', '_'));
  }

  /**
   * Starts this replica's work: deliveries, and the expiry scan every WEBHOOKS_EXPIRY_SCAN_SECONDS,
   * which one replica per round runs (the first to take the round's marker).
   */
  async start(): Promise<void> {
    const every = this.options.config.expiryScanMs;
    let retryMs = START_RETRY_MS;
    const round = () => {
      const slot = Math.floor(this.options.now() / every);
      this.scanning = (async () => {
        // Nothing to do, and no queue to open, while no endpoint exists.
        if (this.closed || (await this.store.list()).length === 0) return;
        await this.startWorking();
        if (await this.store.once(`scan.${slot}`, every)) await this.scan();
      })().catch((err) => {
        this.options.logger.warn({ err }, 'webhooks: expiry scan failed');
        // At start the Redis connection may not be ready yet: without a retry, a replica that
        // restarts with deliveries waiting would make none until the next round (5 min by default).
        if (!this.working && !this.closed) {
          clearTimeout(this.retryTimer);
          this.retryTimer = setTimeout(round, retryMs);
          this.retryTimer.unref();
          retryMs = Math.min(retryMs * 2, every);
        }
      });
    };
    this.scanTimer = setInterval(round, every);
    this.scanTimer.unref();
    round();
    await this.scanning;
  }

  /**
   * Starts making deliveries on this replica, once an endpoint exists: at start, when one is
   * added here, or at the next scan round after another replica added one.
   */
  async startWorking(): Promise<void> {
    if (this.closed) return;
    // A start that failed is forgotten, so the next round or endpoint tries it again.
    this.working ??= this.queue
      .start({ deliver: (job, attempt) => this.deliver(job, attempt) })
      .catch((err: unknown) => {
        this.working = undefined;
        throw err;
      });
    await this.working;
  }

  /** One attempt; throws RetryDelivery while the retry period lasts. */
  async deliver(job: DeliveryJob, attempt: number): Promise<void> {
    const { store, sender, metrics, logger, config, now } = this.options;
    const subscription = await store.get(job.subscriptionId);
    if (!subscription) {
      metrics.deliveries.inc({ event: job.event.type, outcome: 'dropped' });
      return;
    }
    const started = now();
    const body = JSON.stringify(job.event);
    let result: { statusCode: number | null; latencyMs: number; error: string | null };
    try {
      // Again at each attempt: the name may point somewhere else since the subscription was made.
      await checkWebhookUrl(subscription.url, config);
      result = await sender.send(
        subscription.url,
        signedHeaders(subscription, job.eventId, body, new Date(started)),
        body,
      );
    } catch (err) {
      if (!(err instanceof WebhookUrlError)) throw err;
      result = { statusCode: null, latencyMs: now() - started, error: err.message };
    }
    const delivered = result.error === null;
    const exhausted = !delivered && now() - job.enqueuedAt >= config.retryForMs;
    const outcome = delivered ? 'delivered' : exhausted ? 'failed' : 'retrying';
    metrics.deliveries.inc({ event: job.event.type, outcome });
    await store
      .recordAttempt(subscription.id, {
        at: new Date(started).toISOString(),
        eventId: job.eventId,
        event: job.event.type,
        attempt,
        ...result,
        outcome,
      })
      .catch((err) => logger.warn({ err, webhookId: subscription.id }, 'webhooks: attempt not recorded'));
    if (delivered) {
      if (subscription.failing) await this.setFailing(subscription.id, undefined);
      return;
    }
    if (!exhausted) throw new RetryDelivery(result.error ?? 'failed');
    metrics.endpointsFailing.inc();
    logger.warn(
      {
        audit: 'webhook-failing',
        webhookId: subscription.id,
        url: subscription.url,
        eventId: job.eventId,
        event: job.event.type,
        attempts: attempt,
        lastError: result.error,
      },
      `webhooks: endpoint ${subscription.id} marked failing: a delivery ran out of retries after ${attempt} attempts`,
    );
    await this.setFailing(subscription.id, { since: new Date(now()).toISOString(), reason: result.error ?? 'failed' });
  }

  private async setFailing(id: string, failing: Subscription['failing']): Promise<void> {
    const current = await this.store.get(id);
    if (!current) return;
    if (failing) {
      current.failing ??= failing;
    } else delete current.failing;
    await this.store.put(current);
  }

  /** The expiry notices due now, each sent once whichever replica's scan finds it first. */
  async scan(): Promise<void> {
    const now = this.options.now();
    for (const record of await this.options.keys.list()) {
      const notice = expiryNotice(record, now);
      if (!notice) continue;
      await this.emit(
        notice.type,
        keyRef(record),
        { expiresAt: record.expiresAt, ...(notice.days ? { days: notice.days } : {}) },
        { marker: notice.marker, ttlMs: notice.markerTtlMs },
      );
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.scanTimer);
    clearTimeout(this.retryTimer);
    await this.scanning;
    await this.queue.close();
    await this.options.sender.close();
  }
}

function keyRef(record: KeyRecord): KeyRef {
  return { keyId: record.id, plan: record.plan, name: record.name };
}
