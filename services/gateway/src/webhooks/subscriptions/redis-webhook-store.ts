import type { Redis, Result } from 'ioredis';
import type { RedisClient } from '../../redis/clients.js';
import { commandTimeoutOf, FencedWrites } from '../../redis/fenced-writes.js';
import type { DeliveryAttempt, FenceState, QueueFence, Subscription, WebhookStore } from './webhook-store.js';
import { MAX_ATTEMPTS } from './webhook-store.js';

/** How long an endpoint's attempt log outlives its last attempt. */
const ATTEMPTS_TTL_SECONDS = 30 * 86_400;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    webhookFenceState(marker: string, deadlineUs: number): Result<number, Context>;
  }
}

/**
 * A fenced delivery's standing (WebhookStore.fenceState): 1 confirmed, 0 void (Redis's clock is past
 * the deadline, so the fenced confirmation can no longer run), -1 pending. No write: it answers
 * while writes are paused too.
 */
const FENCE_STATE_SCRIPT = `#!lua flags=no-writes
if redis.call('EXISTS', KEYS[1]) == 1 then return 1 end
local t = redis.call('TIME')
if tonumber(t[1]) * 1000000 + tonumber(t[2]) > tonumber(ARGV[1]) then return 0 end
return -1
`;

/**
 * Subscriptions in one hash, each endpoint's attempts in a capped list, markers as keys with a
 * TTL. Every command names one key, so any of them may live on any Cluster node. What the admin
 * API answers for (an endpoint's creation, change, rotation and removal, a ping) is written fenced
 * (redis/fenced-writes.ts): answered 503, it never happens later.
 */
export class RedisWebhookStore implements WebhookStore {
  readonly kind = 'redis';
  private readonly hash: string;
  private readonly fences: FencedWrites;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {
    this.hash = `${prefix}webhooks:subscriptions`;
    this.fences = new FencedWrites(redis);
    if (typeof (redis as Partial<Redis>).webhookFenceState !== 'function') {
      redis.defineCommand('webhookFenceState', { numberOfKeys: 1, lua: FENCE_STATE_SCRIPT });
    }
  }

  private attemptsKey(id: string): string {
    return `${this.prefix}webhooks:attempts:${id}`;
  }

  async put(subscription: Subscription): Promise<void> {
    await this.fences.call(this.hash, 'HSET', subscription.id, JSON.stringify(subscription));
  }

  async add(subscription: Subscription): Promise<boolean> {
    return (await this.fences.call<number>(this.hash, 'HSETNX', subscription.id, JSON.stringify(subscription))) === 1;
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
    const removed = await this.fences.call<number>(this.hash, 'HDEL', id);
    // The endpoint is gone (what the answer reports); its attempt log goes too, or expires.
    await this.redis.del(this.attemptsKey(id)).catch(() => {});
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

  private confirmKey(marker: string): string {
    return `${this.prefix}webhooks:confirmed:${marker}`;
  }

  /**
   * The fence is taken before `queue` runs (its deadline travels with the delivery) and is open
   * as long as `queue` may take plus a command: the confirmation a slow queue delays still lands.
   */
  async fencedQueue(
    marker: string,
    waitMs: number,
    ttlMs: number,
    queue: (fence: QueueFence | null) => Promise<void>,
  ): Promise<void> {
    const key = this.confirmKey(marker);
    const fences = new FencedWrites(this.redis, waitMs + commandTimeoutOf(this.redis));
    await fences.run(key, async (deadlineUs) => {
      await queue({ marker, deadlineUs });
      await this.redis.gatewayFencedCall(key, deadlineUs, 'SET', '1', 'PX', Math.max(1, ttlMs));
    });
  }

  async fenceState(fence: QueueFence): Promise<FenceState> {
    const state = await this.redis.webhookFenceState(this.confirmKey(fence.marker), fence.deadlineUs);
    return state === 1 ? 'confirmed' : state === 0 ? 'void' : 'pending';
  }
}
