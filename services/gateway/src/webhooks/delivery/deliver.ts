import type { FastifyBaseLogger } from 'fastify';
import type { WebhooksConfig } from '../config.js';
import type { Subscription, WebhookStore } from '../subscriptions/webhook-store.js';
import { checkWebhookUrl, WebhookUrlError } from './address-guard.js';
import { type DeliveryJob, RetryDelivery } from './delivery-queue.js';
import type { WebhookMetrics } from './metrics.js';
import { type AttemptResult, signedHeaders, type WebhookSender } from './send.js';

export interface DeliveryParts {
  config: WebhooksConfig;
  store: WebhookStore;
  sender: WebhookSender;
  metrics: WebhookMetrics;
  logger: FastifyBaseLogger;
  now: () => number;
}

/**
 * One attempt at a queued delivery, as the queue hands it over: checks the address again, signs
 * and sends, records the attempt, and marks the endpoint failing (or well again) by the outcome.
 */
export class Delivery {
  constructor(private readonly parts: DeliveryParts) {}

  /** One attempt; throws RetryDelivery while the retry period lasts. */
  async deliver(job: DeliveryJob, attempt: number): Promise<void> {
    const { store, sender, metrics, logger, config, now } = this.parts;
    if (job.fence) {
      const state = await store.fenceState(job.fence);
      // Its request was answered with an error: it must not be made. Not confirmed yet: soon.
      if (state === 'pending') throw new RetryDelivery('not yet confirmed by its request');
      if (state === 'void') {
        metrics.deliveries.inc({ event: job.event.type, outcome: 'dropped' });
        logger.info({ webhookId: job.subscriptionId, eventId: job.eventId }, 'webhooks: a ping answered 503 dropped');
        return;
      }
    }
    const subscription = await store.get(job.subscriptionId);
    if (!subscription) {
      metrics.deliveries.inc({ event: job.event.type, outcome: 'dropped' });
      return;
    }
    const started = now();
    const body = JSON.stringify(job.event);
    let result: AttemptResult;
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
    await this.markFailing(subscription, job, attempt, result.error);
  }

  private async markFailing(
    subscription: Subscription,
    job: DeliveryJob,
    attempts: number,
    lastError: string | null,
  ): Promise<void> {
    const { metrics, logger, now } = this.parts;
    metrics.endpointsFailing.inc();
    logger.warn(
      {
        audit: 'webhook.failing',
        webhookId: subscription.id,
        url: subscription.url,
        eventId: job.eventId,
        event: job.event.type,
        attempts,
        lastError,
      },
      `webhooks: endpoint ${subscription.id} marked failing: a delivery ran out of retries after ${attempts} attempts`,
    );
    await this.setFailing(subscription.id, { since: new Date(now()).toISOString(), reason: lastError ?? 'failed' });
  }

  private async setFailing(id: string, failing: Subscription['failing']): Promise<void> {
    const current = await this.parts.store.get(id);
    if (!current) return;
    if (failing) {
      current.failing ??= failing;
    } else delete current.failing;
    await this.parts.store.put(current);
  }
}
