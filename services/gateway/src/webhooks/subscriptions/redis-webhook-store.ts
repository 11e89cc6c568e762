import type { RedisClient } from '../../redis/clients.js';
import type { DeliveryAttempt, Subscription, WebhookStore } from './webhook-store.js';
import { MAX_ATTEMPTS } from './webhook-store.js';

/** How long an endpoint's attempt log outlives its last attempt. */
const ATTEMPTS_TTL_SECONDS = 30 * 86_400;

/**
 * Subscriptions in one hash, each endpoint's attempts in a capped list, markers as keys with a
 * TTL. Every command names one key, so any of them may live on any Cluster node.
 */
export class RedisWebhookStore implements WebhookStore {
  readonly kind = 'redis';
  private readonly hash: string;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {
    this.hash = `${prefix}webhooks:subscriptions`;
  }

  private attemptsKey(id: string): string {
    return `${this.prefix}webhooks:attempts:${id}`;
  }

  async put(subscription: Subscription): Promise<void> {
    await this.redis.hset(this.hash, subscription.id, JSON.stringify(subscription));
  }

  async add(subscription: Subscription): Promise<boolean> {
    return (await this.redis.hsetnx(this.hash, subscription.id, JSON.stringify(subscription))) === 1;
  }

  async get(id: string): Promise<Subscription | null> {
    const text = await this.redis.hget(this.hash, id);
    return text ? (JSON.parse(text) as Subscription) : null;
  }

  async list(): Promise<Subscription[]> {
    const all = await this.redis.hvals(this.hash);
    return all.map((text) => JSON.parse(text) as Subscription).sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  async remove(id: string): Promise<boolean> {
    const removed = await this.redis.hdel(this.hash, id);
    await this.redis.del(this.attemptsKey(id));
    return removed > 0;
  }

  async recordAttempt(id: string, attempt: DeliveryAttempt): Promise<void> {
    const key = this.attemptsKey(id);
    await this.redis
      .multi()
      .lpush(key, JSON.stringify(attempt))
      .ltrim(key, 0, MAX_ATTEMPTS - 1)
      .expire(key, ATTEMPTS_TTL_SECONDS)
      .exec();
  }

  async attempts(id: string): Promise<DeliveryAttempt[]> {
    const all = await this.redis.lrange(this.attemptsKey(id), 0, MAX_ATTEMPTS - 1);
    return all.map((text) => JSON.parse(text) as DeliveryAttempt);
  }

  async once(marker: string, ttlMs: number): Promise<boolean> {
    const set = await this.redis.set(`${this.prefix}webhooks:once:${marker}`, '1', 'PX', Math.max(1, ttlMs), 'NX');
    return set === 'OK';
  }
}
