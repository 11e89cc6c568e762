import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MemoryWebhookStore } from '../../src/webhooks/subscriptions/memory-webhook-store.js';
import { RedisWebhookStore } from '../../src/webhooks/subscriptions/redis-webhook-store.js';
import { MAX_ATTEMPTS } from '../../src/webhooks/subscriptions/webhook-store.js';
import { useRedisClient } from '../support/helpers.js';
import { webhookStoreContract } from './webhook-store.contract.js';

const redis = useRedisClient();

webhookStoreContract('MemoryWebhookStore', async () => new MemoryWebhookStore());
webhookStoreContract('RedisWebhookStore', async () => {
  return new RedisWebhookStore(redis(), `wc${randomUUID().slice(0, 8)}:`);
});

describe('how long what the stores keep lives', () => {
  it('memory: a marker is taken again from the instant its time has passed, not before', async () => {
    let t = 1_000_000;
    const store = new MemoryWebhookStore(() => t);
    expect(await store.once('m', 1_000)).toBe(true);
    t += 999;
    expect(await store.once('m', 1_000)).toBe(false);
    t += 1;
    expect(await store.once('m', 1_000)).toBe(true);
  });

  it('Redis: a marker expires after its time (at least a millisecond), an endpoint’s attempts 30 days after the last', async () => {
    const prefix = `wt${randomUUID().slice(0, 8)}:`;
    const store = new RedisWebhookStore(redis(), prefix);
    expect(await store.once('m', 60_000)).toBe(true);
    const left = await redis().pttl(`${prefix}webhooks:once:m`);
    expect(left).toBeGreaterThan(55_000);
    expect(left).toBeLessThanOrEqual(60_000);
    // A time of 0 or less still takes the marker, for a millisecond, instead of failing.
    expect(await store.once('zero', 0)).toBe(true);
    await store.recordAttempt('wh_t', {
      at: '2026-11-26T12:00:00.000Z',
      eventId: 'msg_t',
      event: 'key.created',
      attempt: 1,
      statusCode: 200,
      latencyMs: 5,
      error: null,
      outcome: 'delivered',
    });
    // At most MAX_ATTEMPTS are kept in Redis, not only shown.
    for (let n = 2; n <= MAX_ATTEMPTS + 3; n++) {
      await store.recordAttempt('wh_t', {
        at: '2026-11-26T12:00:00.000Z',
        eventId: 'msg_t',
        event: 'key.created',
        attempt: n,
        statusCode: 503,
        latencyMs: 5,
        error: 'endpoint answered 503',
        outcome: 'retrying',
      });
    }
    expect(await redis().llen(`${prefix}webhooks:attempts:wh_t`)).toBe(MAX_ATTEMPTS);
    const attemptsLeft = await redis().ttl(`${prefix}webhooks:attempts:wh_t`);
    expect(attemptsLeft).toBeGreaterThan(30 * 86_400 - 60);
    expect(attemptsLeft).toBeLessThanOrEqual(30 * 86_400);
  });
});
