import type { FastifyBaseLogger } from 'fastify';
import type { Registry } from 'prom-client';
import type { KeyResolver } from '../keys/key-resolver.js';
import type { KeyStore } from '../keys/key-store.js';
import { queueConnection, type RedisClient, type RedisTarget } from '../redis/clients.js';
import type { WebhooksConfig } from './config.js';
import { BullmqDeliveryQueue } from './delivery/bullmq-delivery-queue.js';
import type { DeliveryQueue } from './delivery/delivery-queue.js';
import { MemoryDeliveryQueue } from './delivery/memory-delivery-queue.js';
import { createWebhookMetrics } from './delivery/metrics.js';
import { WebhookSender } from './delivery/send.js';
import { MemoryWebhookStore } from './subscriptions/memory-webhook-store.js';
import { RedisWebhookStore } from './subscriptions/redis-webhook-store.js';
import { Webhooks } from './webhooks.js';

/**
 * Webhooks on the gateway's Redis (subscriptions, markers and the BullMQ queue, shared by the
 * replicas), or all in this process in embedded mode. Called by createDeps.
 */
export function createWebhooks(
  config: { webhooks: WebhooksConfig; redis: RedisTarget | undefined; redisPrefix: string },
  redis: RedisClient | null,
  parts: {
    registry: Registry;
    logger: FastifyBaseLogger;
    keyStore: Pick<KeyStore, 'get' | 'expiringBetween'>;
    keyResolver: KeyResolver;
    now: () => number;
  },
): Webhooks {
  const settings = config.webhooks;
  const target = config.redis;
  const retry = { baseMs: settings.retryBaseMs, maxMs: settings.retryMaxDelayMs };
  const queue: DeliveryQueue =
    redis && target
      ? new BullmqDeliveryQueue({ connect: () => queueConnection(target), prefix: config.redisPrefix, retry })
      : new MemoryDeliveryQueue(retry);
  const { keyStore, keyResolver } = parts;
  return new Webhooks({
    config: settings,
    store: redis ? new RedisWebhookStore(redis, config.redisPrefix) : new MemoryWebhookStore(parts.now),
    queue,
    sender: new WebhookSender(settings.timeoutMs, settings.allowPrivate, parts.now),
    metrics: createWebhookMetrics(parts.registry, queue, parts.now),
    logger: parts.logger,
    keys: {
      get: async (id) => keyResolver.fileRecord(id) ?? (await keyStore.get(id)),
      expiringBetween: async (from, to) => [
        ...keyResolver.fileRecords().filter((r) => {
          const at = r.expiresAt === undefined ? Number.NaN : Date.parse(r.expiresAt);
          return at >= from.getTime() && at <= to.getTime();
        }),
        ...(await keyStore.expiringBetween(from, to)),
      ],
    },
    now: parts.now,
  });
}
