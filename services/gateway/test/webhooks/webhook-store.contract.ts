import { describe, expect, it } from 'vitest';
import type { DeliveryAttempt, Subscription, WebhookStore } from '../../src/webhooks/subscriptions/webhook-store.js';
import { MAX_ATTEMPTS } from '../../src/webhooks/subscriptions/webhook-store.js';

function subscription(id: string, overrides: Partial<Subscription> = {}): Subscription {
  return {
    id,
    url: 'https://hooks.example.com/x',
    events: ['key.created'],
    description: '',
    secret: 'whsec_c2VjcmV0',
    createdAt: `2026-01-01T00:00:0${id.length % 10}.000Z`,
    ...overrides,
  };
}

function attempt(n: number): DeliveryAttempt {
  return {
    at: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(),
    eventId: 'msg_1',
    event: 'key.created',
    attempt: n,
    statusCode: n % 2 ? 503 : null,
    latencyMs: n,
    error: n % 2 ? 'endpoint answered 503' : 'ECONNREFUSED: refused',
    outcome: 'retrying',
  };
}

/** What every WebhookStore must do; `make` gives a fresh, empty store. */
export function webhookStoreContract(name: string, make: () => Promise<WebhookStore>): void {
  describe(`${name} (WebhookStore contract)`, () => {
    it('puts, gets, lists, replaces and removes subscriptions', async () => {
      const store = await make();
      expect(await store.get('wh_a')).toBeNull();
      await store.put(subscription('wh_a'));
      await store.put(subscription('wh_bb', { events: ['key.revoked', 'key.banned'] }));
      expect(await store.get('wh_a')).toEqual(subscription('wh_a'));
      expect((await store.list()).map((s) => s.id).sort()).toEqual(['wh_a', 'wh_bb']);
      await store.put(subscription('wh_a', { failing: { since: '2026-01-02T00:00:00.000Z', reason: 'x' } }));
      expect((await store.get('wh_a'))?.failing?.reason).toBe('x');
      expect(await store.remove('wh_a')).toBe(true);
      expect(await store.remove('wh_a')).toBe(false);
      expect(await store.get('wh_a')).toBeNull();
    });

    it('adds a subscription once: a second add with its id leaves the first as it is', async () => {
      const store = await make();
      expect(await store.add(subscription('wh_a'))).toBe(true);
      expect(await store.add(subscription('wh_a', { url: 'https://other.example.com/y' }))).toBe(false);
      expect(await store.get('wh_a')).toEqual(subscription('wh_a'));
      expect(await store.list()).toHaveLength(1);
    });

    it('gives copies: changing what it returned changes nothing stored', async () => {
      const store = await make();
      await store.put(subscription('wh_a'));
      const got = (await store.get('wh_a')) as Subscription;
      got.events.push('key.banned');
      expect((await store.get('wh_a'))?.events).toEqual(['key.created']);
    });

    it('keeps the latest attempts per subscription, newest first, and drops them with it', async () => {
      const store = await make();
      await store.put(subscription('wh_a'));
      for (let n = 1; n <= MAX_ATTEMPTS + 5; n++) await store.recordAttempt('wh_a', attempt(n));
      const kept = await store.attempts('wh_a');
      expect(kept).toHaveLength(MAX_ATTEMPTS);
      expect(kept[0]).toEqual(attempt(MAX_ATTEMPTS + 5));
      expect(kept.at(-1)).toEqual(attempt(6));
      expect(await store.attempts('wh_other')).toEqual([]);
      await store.remove('wh_a');
      expect(await store.attempts('wh_a')).toEqual([]);
    });

    it('lets one caller of many take a marker', async () => {
      const store = await make();
      const taken = await Promise.all(Array.from({ length: 20 }, () => store.once('quota.k1.day.1.80', 60_000)));
      expect(taken.filter(Boolean)).toHaveLength(1);
      expect(await store.once('quota.k1.day.1.100', 60_000)).toBe(true);
    });
  });
}
