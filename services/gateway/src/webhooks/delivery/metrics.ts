import { Counter, Gauge, type Registry } from 'prom-client';
import type { DeliveryQueue } from './delivery-queue.js';

/** The webhook series, on the gateway's registry (GET /metrics). */
export function createWebhookMetrics(registry: Registry, queue: DeliveryQueue, now: () => number) {
  return {
    deliveries: new Counter({
      name: 'gateway_webhook_deliveries_total',
      help: 'Webhook delivery attempts by event type and outcome: delivered, retrying, failed (retries exhausted), dropped (endpoint deleted)',
      labelNames: ['event', 'outcome'],
      registers: [registry],
    }),
    endpointsFailing: new Counter({
      name: 'gateway_webhook_endpoints_failing_total',
      help: 'Times an endpoint was marked failing: a delivery to it ran out of retries',
      registers: [registry],
    }),
    queueDepth: new Gauge({
      name: 'gateway_webhook_queue_depth',
      help: 'Webhook deliveries waiting for an attempt or a retry (shared by the replicas with Redis)',
      registers: [registry],
      async collect() {
        this.set((await queue.stats().catch(() => ({ depth: 0 }))).depth);
      },
    }),
    oldestPending: new Gauge({
      name: 'gateway_webhook_oldest_pending_seconds',
      help: 'Age of the oldest webhook delivery still waiting (0 when none waits)',
      registers: [registry],
      async collect() {
        const oldest = (await queue.stats().catch(() => ({ oldestEnqueuedAt: null }))).oldestEnqueuedAt;
        this.set(oldest === null ? 0 : Math.max(0, (now() - oldest) / 1000));
      },
    }),
  };
}

export type WebhookMetrics = ReturnType<typeof createWebhookMetrics>;
