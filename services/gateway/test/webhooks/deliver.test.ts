import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import type { WebhooksConfig } from '../../src/webhooks/config.js';
import { Delivery } from '../../src/webhooks/delivery/deliver.js';
import { type DeliveryJob, RetryDelivery } from '../../src/webhooks/delivery/delivery-queue.js';
import { MemoryDeliveryQueue } from '../../src/webhooks/delivery/memory-delivery-queue.js';
import { createWebhookMetrics } from '../../src/webhooks/delivery/metrics.js';
import { WebhookSender } from '../../src/webhooks/delivery/send.js';
import { MemoryWebhookStore } from '../../src/webhooks/subscriptions/memory-webhook-store.js';
import type { Subscription } from '../../src/webhooks/subscriptions/webhook-store.js';

/**
 * One attempt of a queued delivery (delivery/deliver.ts) against a receiver on loopback: what it
 * records, when it gives up and marks the endpoint failing, what it counts and logs. Through a
 * gateway and its queues: webhooks.test.ts.
 */

const T0 = Date.UTC(2026, 10, 26, 12);
const RETRY_FOR_MS = 60_000;
const iso = (ms: number) => new Date(ms).toISOString();

const config: WebhooksConfig = {
  allowInsecure: true,
  allowPrivate: true,
  quotaWarningPercents: [80],
  retryBaseMs: 1_000,
  retryMaxDelayMs: 1_000,
  retryForMs: RETRY_FOR_MS,
  timeoutMs: 2_000,
  expiryScanMs: 60_000,
};

let server: Server | undefined;
afterEach(() => {
  server?.closeAllConnections();
  server?.close();
  server = undefined;
});

/** A receiver answering `status`; `during` runs before each answer (a change made meanwhile). */
async function receiver(status: number, during: () => Promise<void> = async () => {}): Promise<string> {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      void during().then(() => res.writeHead(status).end());
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
}

async function parts(url: string, rules: WebhooksConfig = config) {
  let t = T0;
  const clock = {
    now: () => t,
    set(ms: number) {
      t = ms;
    },
  };
  const store = new MemoryWebhookStore(clock.now);
  const registry = new Registry();
  const queue = new MemoryDeliveryQueue({ baseMs: 1_000, maxMs: 1_000 });
  const metrics = createWebhookMetrics(registry, queue, clock.now);
  const sender = new WebhookSender(2_000, true, clock.now);
  onTestFinished(() => sender.close());
  const warned: Array<{ fields: Record<string, unknown>; msg: string }> = [];
  const logger = {
    warn: (fields: Record<string, unknown>, msg: string) => warned.push({ fields, msg }),
  } as unknown as FastifyBaseLogger;
  const delivery = new Delivery({ config: rules, store, sender, metrics, logger, now: clock.now });
  const subscription: Subscription = {
    id: 'wh_d',
    url,
    events: ['key.created'],
    description: '',
    secret: `whsec_${Buffer.alloc(32, 3).toString('base64')}`,
    createdAt: iso(T0),
  };
  await store.put(subscription);
  const job: DeliveryJob = {
    subscriptionId: 'wh_d',
    eventId: 'msg_d',
    event: { type: 'key.created', timestamp: iso(T0), data: {} },
    enqueuedAt: T0,
  };
  const deliveries = async () =>
    Object.fromEntries(
      (await registry.getSingleMetric('gateway_webhook_deliveries_total')?.get())?.values.map((v) => [
        `${v.labels.event}/${v.labels.outcome}`,
        v.value,
      ]) ?? [],
    );
  const failingCount = async () =>
    (await registry.getSingleMetric('gateway_webhook_endpoints_failing_total')?.get())?.values[0]?.value;
  return { clock, store, delivery, job, warned, deliveries, failingCount, subscription };
}

describe('an attempt at a delivery', () => {
  it('records a delivered attempt in full, counts it, and clears a failing mark', async () => {
    const p = await parts(await receiver(200));
    await p.store.put({ ...p.subscription, failing: { since: iso(T0 - 1), reason: 'endpoint answered 503' } });
    await p.delivery.deliver(p.job, 3);
    expect(await p.store.attempts('wh_d')).toEqual([
      {
        at: iso(T0),
        eventId: 'msg_d',
        event: 'key.created',
        attempt: 3,
        statusCode: 200,
        latencyMs: 0,
        error: null,
        outcome: 'delivered',
      },
    ]);
    expect(await p.store.get('wh_d')).not.toHaveProperty('failing');
    expect(await p.deliveries()).toEqual({ 'key.created/delivered': 1 });
  });

  it('retries within the retry period, up to its last millisecond, then marks the endpoint failing once', async () => {
    const p = await parts(await receiver(503));
    p.clock.set(T0 + RETRY_FOR_MS - 1);
    await expect(p.delivery.deliver(p.job, 1)).rejects.toEqual(new RetryDelivery('endpoint answered 503'));
    expect(await p.store.get('wh_d')).not.toHaveProperty('failing');
    p.clock.set(T0 + RETRY_FOR_MS);
    await expect(p.delivery.deliver(p.job, 2)).resolves.toBeUndefined();
    const marked = { since: iso(T0 + RETRY_FOR_MS), reason: 'endpoint answered 503' };
    expect((await p.store.get('wh_d'))?.failing).toEqual(marked);
    expect((await p.store.attempts('wh_d')).map((a) => [a.attempt, a.outcome])).toEqual([
      [2, 'failed'],
      [1, 'retrying'],
    ]);
    expect(p.warned).toEqual([
      {
        fields: {
          audit: 'webhook.failing',
          webhookId: 'wh_d',
          url: p.subscription.url,
          eventId: 'msg_d',
          event: 'key.created',
          attempts: 2,
          lastError: 'endpoint answered 503',
        },
        msg: 'webhooks: endpoint wh_d marked failing: a delivery ran out of retries after 2 attempts',
      },
    ]);
    expect(await p.failingCount()).toBe(1);
    // Another delivery running out later keeps the mark's first instant.
    p.clock.set(T0 + 2 * RETRY_FOR_MS);
    await p.delivery.deliver(p.job, 3);
    expect((await p.store.get('wh_d'))?.failing).toEqual(marked);
    expect(await p.deliveries()).toEqual({ 'key.created/retrying': 1, 'key.created/failed': 2 });
  });

  it('drops a delivery for an endpoint that no longer exists, and counts it', async () => {
    const p = await parts(await receiver(200));
    await p.store.remove('wh_d');
    await p.delivery.deliver(p.job, 1);
    expect(await p.deliveries()).toEqual({ 'key.created/dropped': 1 });
  });

  it('marks nothing for an endpoint deleted while its last attempt was out', async () => {
    let p: Awaited<ReturnType<typeof parts>> | undefined;
    const url = await receiver(503, async () => {
      await p?.store.remove('wh_d');
    });
    p = await parts(url);
    p.clock.set(T0 + RETRY_FOR_MS);
    await expect(p.delivery.deliver(p.job, 5)).resolves.toBeUndefined();
    expect(await p.store.get('wh_d')).toBeNull();
  });

  it('refuses an address the endpoint rules forbid at the attempt itself, sending nothing', async () => {
    let hits = 0;
    const url = await receiver(200, async () => {
      hits++;
    });
    const p = await parts(url, { ...config, allowPrivate: false });
    await expect(p.delivery.deliver(p.job, 1)).rejects.toBeInstanceOf(RetryDelivery);
    const [attempt] = await p.store.attempts('wh_d');
    expect(attempt).toMatchObject({ statusCode: null, latencyMs: 0, outcome: 'retrying' });
    expect(attempt?.error).toBe(
      "url's 127.0.0.1 resolves to 127.0.0.1: Loopback (127.0.0.0/8), not globally reachable; endpoints must be public (WEBHOOKS_ALLOW_PRIVATE is off)",
    );
    expect(hits).toBe(0);
  });

  it('still gives its outcome when the attempt cannot be recorded, and says so', async () => {
    const p = await parts(await receiver(200));
    p.store.recordAttempt = async () => {
      throw new Error('store away');
    };
    await p.delivery.deliver(p.job, 1);
    expect(p.warned.map((w) => [w.msg, w.fields.webhookId, String(w.fields.err)])).toEqual([
      ['webhooks: attempt not recorded', 'wh_d', 'Error: store away'],
    ]);
    expect(await p.deliveries()).toEqual({ 'key.created/delivered': 1 });
  });
});

describe('the queue’s figures on /metrics', () => {
  const gauges = async (registry: Registry) =>
    Object.fromEntries(
      await Promise.all(
        ['gateway_webhook_queue_depth', 'gateway_webhook_oldest_pending_seconds'].map(async (name) => [
          name,
          (await registry.getSingleMetric(name)?.get())?.values[0]?.value,
        ]),
      ),
    );

  it('are how many deliveries wait and the oldest one’s age in seconds, never below 0', async () => {
    let t = T0;
    const registry = new Registry();
    const queue = new MemoryDeliveryQueue({ baseMs: 1_000, maxMs: 1_000 });
    createWebhookMetrics(registry, queue, () => t);
    expect(await gauges(registry)).toEqual({
      gateway_webhook_queue_depth: 0,
      gateway_webhook_oldest_pending_seconds: 0,
    });
    const job = (enqueuedAt: number): DeliveryJob => ({
      subscriptionId: 'wh_m',
      eventId: `msg_${enqueuedAt}`,
      event: { type: 'key.created', timestamp: iso(enqueuedAt), data: {} },
      enqueuedAt,
    });
    await queue.add(job(T0 - 1_500), 'j1');
    await queue.add(job(T0 - 500), 'j2');
    expect(await gauges(registry)).toEqual({
      gateway_webhook_queue_depth: 2,
      gateway_webhook_oldest_pending_seconds: 1.5,
    });
    // A replica whose clock is behind the one that queued them.
    t = T0 - 2_000;
    expect((await gauges(registry)).gateway_webhook_oldest_pending_seconds).toBe(0);
    await queue.close();
  });

  it('are 0 when the queue cannot say', async () => {
    const registry = new Registry();
    const queue = new MemoryDeliveryQueue({ baseMs: 1_000, maxMs: 1_000 });
    queue.stats = async () => {
      throw new Error('Redis away');
    };
    createWebhookMetrics(registry, queue, () => T0);
    expect(await gauges(registry)).toEqual({
      gateway_webhook_queue_depth: 0,
      gateway_webhook_oldest_pending_seconds: 0,
    });
  });
});
