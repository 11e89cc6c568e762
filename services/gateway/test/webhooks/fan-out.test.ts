import type { FastifyBaseLogger } from 'fastify';
import { afterEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import type { KeyRecord } from '../../src/keys/key-store.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import type { WindowState } from '../../src/limits/key-limiter.js';
import type { DeliveryJob, QueueHandlers } from '../../src/webhooks/delivery/delivery-queue.js';
import { MemoryDeliveryQueue } from '../../src/webhooks/delivery/memory-delivery-queue.js';
import { FanOut } from '../../src/webhooks/fan-out.js';
import { KeyEvents, type KeySource } from '../../src/webhooks/intake/key-events.js';
import { Scheduling } from '../../src/webhooks/scheduling.js';
import { MemoryWebhookStore } from '../../src/webhooks/subscriptions/memory-webhook-store.js';
import type { Subscription, WebhookStore } from '../../src/webhooks/subscriptions/webhook-store.js';

/**
 * The webhooks' inner parts on their memory stores, without a gateway: which events go to which
 * endpoints and how often (fan-out.ts, intake/key-events.ts), and when a replica works
 * (scheduling.ts). End to end, with receivers and BullMQ: webhooks.test.ts.
 */

const DAY_MS = 86_400_000;
const T0 = Date.UTC(2026, 10, 26, 12);

/** A logger that keeps what is warned. */
function warnings() {
  const lines: Array<{ msg: string; fields: Record<string, unknown> }> = [];
  const logger = {
    warn: (fields: Record<string, unknown>, msg: string) => lines.push({ msg, fields }),
    info: () => {},
    error: () => {},
    debug: () => {},
  } as unknown as FastifyBaseLogger;
  return { lines, logger };
}

const subscription = (id: string, events: Subscription['events']): Subscription => ({
  id,
  url: `https://${id}.example/hook`,
  events,
  description: '',
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  createdAt: new Date(T0).toISOString(),
});

const record = (id: string, fields: Partial<KeyRecord> = {}): KeyRecord =>
  ({
    id,
    plan: 'pro',
    name: `name of ${id}`,
    sha256: `hash of ${id}`,
    createdAt: new Date(T0 - DAY_MS).toISOString(),
    ...fields,
  }) as KeyRecord;

/** A fan-out onto a memory queue whose deliveries land in `jobs` at once. */
async function fanOutParts(store: WebhookStore = new MemoryWebhookStore(() => T0)) {
  const clock = { now: () => T0 };
  const jobs: DeliveryJob[] = [];
  const queue = new MemoryDeliveryQueue({ baseMs: 1_000, maxMs: 1_000 });
  await queue.start({ deliver: async (job) => void jobs.push(job) });
  onTestFinished(() => queue.close());
  const { lines, logger } = warnings();
  const fanOut = new FanOut(store, queue, logger, clock.now);
  const delivered = async (n: number) => {
    await vi.waitFor(() => expect(jobs).toHaveLength(n), { interval: 5 });
    return jobs.map((j) => [j.subscriptionId, j.event.type]);
  };
  return { store, clock, jobs, queue, fanOut, lines, logger, delivered };
}

describe('the fan-out of an event', () => {
  it('queues it once for each endpoint subscribed to it, with one id for all', async () => {
    const { store, fanOut, jobs, delivered } = await fanOutParts();
    await store.put(subscription('wh_a', ['key.banned', 'key.revoked']));
    await store.put(subscription('wh_b', ['key.revoked']));
    await store.put(subscription('wh_c', ['key.created']));
    await fanOut.emit('key.revoked', { keyId: 'key_1', plan: 'pro', name: 'n' }, { changed: ['revokedAt'] });
    expect((await delivered(2)).sort()).toEqual([
      ['wh_a', 'key.revoked'],
      ['wh_b', 'key.revoked'],
    ]);
    expect(jobs[0]?.eventId).toBe(jobs[1]?.eventId);
    expect(jobs[0]?.eventId).toMatch(/^msg_[0-9a-f-]{36}$/);
    expect(jobs[0]?.event).toEqual({
      type: 'key.revoked',
      timestamp: new Date(T0).toISOString(),
      data: { keyId: 'key_1', plan: 'pro', name: 'n', changed: ['revokedAt'] },
    });
    expect(jobs[0]?.enqueuedAt).toBe(T0);
  });

  it('with a marker, queues it for the first caller only, under an id made of the marker', async () => {
    const { store, fanOut, jobs, delivered } = await fanOutParts();
    await store.put(subscription('wh_a', ['key.banned']));
    const once = { marker: 'ban.key_1.123', ttlMs: 60_000 };
    await fanOut.emit('key.banned', { keyId: 'key_1', plan: 'pro', name: 'n' }, {}, once);
    await fanOut.emit('key.banned', { keyId: 'key_1', plan: 'pro', name: 'n' }, {}, once);
    await delivered(1);
    expect(jobs[0]?.eventId).toBe('msg_ban.key_1.123');
    // Without one, each call is an event of its own.
    await fanOut.emit('key.banned', { keyId: 'key_1', plan: 'pro', name: 'n' }, {});
    await delivered(2);
  });

  it('takes no marker when no endpoint listens, so a later endpoint still gets the event', async () => {
    const { store, fanOut, delivered } = await fanOutParts();
    const once = { marker: 'quota.key_1.day.1.80', ttlMs: 60_000 };
    await fanOut.emit('key.quota.warning', { keyId: 'key_1', plan: 'pro', name: 'n' }, {}, once);
    expect(await store.once('probe', 1)).toBe(true);
    await store.put(subscription('wh_a', ['key.quota.warning']));
    await fanOut.emit('key.quota.warning', { keyId: 'key_1', plan: 'pro', name: 'n' }, {}, once);
    // The marker was taken by the first call (it is taken before the endpoints are read).
    expect(await store.once(once.marker, 60_000)).toBe(false);
    expect(await delivered(0)).toEqual([]);
  });

  it('logs an event it cannot queue and throws nothing at its caller', async () => {
    const store = new MemoryWebhookStore(() => T0);
    store.list = async () => {
      throw new Error('store away');
    };
    const { fanOut, lines } = await fanOutParts(store);
    await expect(fanOut.emit('key.banned', { keyId: 'key_1', plan: 'pro', name: 'n' }, {})).resolves.toBeUndefined();
    expect(lines).toEqual([
      { msg: 'webhooks: event not queued', fields: expect.objectContaining({ event: 'key.banned', keyId: 'key_1' }) },
    ]);
    expect(String(lines[0]?.fields.err)).toContain('store away');
  });

  it('sends a ping to the endpoint it is asked for, whatever it listens to', async () => {
    const { fanOut, jobs, delivered } = await fanOutParts();
    const id = await fanOut.ping(subscription('wh_p', ['key.created']), 1_000, 60_000, (queued) => queued);
    await delivered(1);
    expect(jobs[0]).toEqual({
      subscriptionId: 'wh_p',
      eventId: id,
      event: { type: 'webhook.test', timestamp: new Date(T0).toISOString(), data: { webhookId: 'wh_p' } },
      enqueuedAt: T0,
    });
  });
});

describe('key events', () => {
  /** The key store's own expiry query over these records. */
  const keys = (...records: KeyRecord[]): KeySource => {
    const store = new MemoryKeyStore();
    const loaded = Promise.all(records.map((r) => store.insert(r)));
    return {
      get: async (id) => {
        await loaded;
        return store.get(id);
      },
      expiringBetween: async (from, to) => {
        await loaded;
        return store.expiringBetween(from, to);
      },
    };
  };
  const day = (remaining: number, resetAt: number): WindowState => ({
    name: 'day',
    limit: 10,
    remaining,
    windowSeconds: 86_400,
    resetAt,
    scope: 'key',
  });

  it('marks a quota crossing for a day after its window resets: repeats within are dropped, later ones sent', async () => {
    let now = T0;
    const parts = await fanOutParts(new MemoryWebhookStore(() => now));
    await parts.store.put(subscription('wh_q', ['key.quota.warning']));
    const events = new KeyEvents(parts.fanOut, keys(), [80], parts.logger, () => now);
    const reset = T0 + 6 * 3_600_000;
    const cross = async (at: number) => {
      now = at;
      events.onAdmitted(record('key_q'), [day(2, reset)], 1);
      // emit runs in the background; its marker is taken in the same turn or the next.
      await new Promise((resolve) => setImmediate(resolve));
    };
    await cross(T0);
    await parts.delivered(1);
    // The same crossing (same window end) again, by another replica or a retry, up to a day past the reset.
    await cross(T0 + 1);
    await cross(reset + DAY_MS - 1);
    await cross(reset - 1);
    expect(parts.jobs).toHaveLength(1);
    await cross(reset + DAY_MS);
    await parts.delivered(2);
    expect(parts.jobs[1]?.eventId).toBe(`msg_quota.key_q.day.${reset}.80`);
  });

  it('sends an admin change with the key as it is now and only the fields an event may carry', async () => {
    const parts = await fanOutParts();
    await parts.store.put(subscription('wh_k', ['key.updated', 'key.revoked', 'key.rotated', 'key.banned']));
    const events = new KeyEvents(parts.fanOut, keys(record('key_k')), [80], parts.logger, parts.clock.now);
    events.keyChanged('key.updated', 'key_k', {
      changed: ['name'],
      expiresAt: '2027-01-01T00:00:00.000Z',
      previousKeyExpiresAt: '2026-11-27T00:00:00.000Z',
      secret: 'never',
      hash: 'never',
    });
    await parts.delivered(1);
    expect(parts.jobs[0]?.event.data).toEqual({
      keyId: 'key_k',
      plan: 'pro',
      name: 'name of key_k',
      changed: ['name'],
      expiresAt: '2027-01-01T00:00:00.000Z',
      previousKeyExpiresAt: '2026-11-27T00:00:00.000Z',
    });
    // A key no store has (gone since): named by its id alone.
    events.keyChanged('key.revoked', 'key_gone', {});
    await parts.delivered(2);
    expect(parts.jobs[1]?.event).toMatchObject({
      type: 'key.revoked',
      data: { keyId: 'key_gone', plan: '', name: '' },
    });
    events.onBanned(record('key_k'), T0 + 60_000);
    await parts.delivered(3);
    expect(parts.jobs[2]?.event).toMatchObject({
      type: 'key.banned',
      data: { keyId: 'key_k', bannedUntil: new Date(T0 + 60_000).toISOString() },
    });
  });

  it('logs an admin change it cannot send when the key cannot be read', async () => {
    const parts = await fanOutParts();
    const failing: KeySource = {
      get: async () => {
        throw new Error('keys away');
      },
      expiringBetween: async () => [],
    };
    new KeyEvents(parts.fanOut, failing, [80], parts.logger, parts.clock.now).keyChanged('key.rotated', 'key_r', {});
    await vi.waitFor(() => expect(parts.lines).toHaveLength(1), { interval: 5 });
    expect(parts.lines[0]).toEqual({
      msg: 'webhooks: event not sent',
      fields: expect.objectContaining({ keyId: 'key_r', event: 'key.rotated' }),
    });
  });

  it('scans for expiry notices: days for a key expiring, none for one expired, nothing for the rest', async () => {
    const parts = await fanOutParts();
    await parts.store.put(subscription('wh_e', ['key.expiring', 'key.expired']));
    const soon = record('key_soon', { expiresAt: new Date(T0 + 2 * DAY_MS + 1).toISOString() });
    const gone = record('key_gone', { expiresAt: new Date(T0 - 60_000).toISOString() });
    // Two keys that expired at once: a notice each.
    const twin = record('key_twin', { expiresAt: gone.expiresAt });
    const events = new KeyEvents(
      parts.fanOut,
      keys(soon, gone, twin, record('key_never')),
      [80],
      parts.logger,
      () => T0,
    );
    await events.scan();
    await parts.delivered(3);
    const byKey = Object.fromEntries(parts.jobs.map((j) => [j.event.data.keyId, j.event]));
    expect(byKey.key_soon).toMatchObject({ type: 'key.expiring', data: { expiresAt: soon.expiresAt, days: 3 } });
    expect(byKey.key_gone).toMatchObject({ type: 'key.expired', data: { expiresAt: gone.expiresAt } });
    expect(byKey.key_gone?.data).not.toHaveProperty('days');
    expect(byKey.key_twin).toMatchObject({ type: 'key.expired' });
    // A second scan finds the same notices taken.
    await events.scan();
    expect(parts.jobs).toHaveLength(3);
  });
});

describe('when a replica works (scheduling)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** A memory queue whose start fails its first `failures` times. */
  class FlakyQueue extends MemoryDeliveryQueue {
    starts = 0;
    constructor(private failures: number) {
      super({ baseMs: 1_000, maxMs: 1_000 });
    }
    override async start(handlers: QueueHandlers): Promise<void> {
      this.starts++;
      if (this.failures-- > 0) throw new Error('Redis not ready');
      await super.start(handlers);
    }
  }

  function replica(store: WebhookStore, queue: FlakyQueue, now: () => number, every = 60_000) {
    const scans: number[] = [];
    const { lines, logger } = warnings();
    const scheduling = new Scheduling({
      expiryScanMs: every,
      store,
      queue,
      handlers: { deliver: async () => {} },
      scan: async () => void scans.push(now()),
      logger,
      now,
    });
    onTestFinished(async () => {
      await scheduling.stop();
      await queue.close();
    });
    return { scheduling, scans, lines };
  }

  it('tries a start that failed again after 1 s, then 2 s, 4 s…, until deliveries start', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
    const store = new MemoryWebhookStore(() => T0);
    await store.put(subscription('wh_s', ['key.created']));
    const queue = new FlakyQueue(3);
    const { scheduling, scans, lines } = replica(store, queue, () => T0);
    await scheduling.start();
    expect(queue.starts).toBe(1);
    for (const [wait, starts] of [
      [1_000, 2],
      [2_000, 3],
      [4_000, 4],
    ] as const) {
      await vi.advanceTimersByTimeAsync(wait - 1);
      expect(queue.starts, `${wait - 1} ms on`).toBe(starts - 1);
      await vi.advanceTimersByTimeAsync(1);
      expect(queue.starts, `${wait} ms on`).toBe(starts);
    }
    expect(lines.map((l) => l.msg)).toEqual(Array(3).fill('webhooks: expiry scan failed'));
    expect(String(lines[0]?.fields.err)).toBe('Error: Redis not ready');
    // Started: the scan of the round ran, and no more tries until the next round.
    expect(scans).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(60_000 - 7_000 - 1);
    expect(queue.starts).toBe(4);
  });

  it('waits at most the scan period between tries', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
    const store = new MemoryWebhookStore(() => T0);
    await store.put(subscription('wh_s', ['key.created']));
    // A scan period of 10 s: tries at 0, 1, 3 and 7 s, then the round at 10 s, which replaces the
    // try due at 15 s with one 10 s after it: at 20 s, with the next round (one try for both).
    const queue = new FlakyQueue(100);
    const { scheduling } = replica(store, queue, () => T0, 10_000);
    await scheduling.start();
    await vi.advanceTimersByTimeAsync(7_000);
    expect(queue.starts).toBe(4);
    await vi.advanceTimersByTimeAsync(3_000);
    expect(queue.starts).toBe(5);
    await vi.advanceTimersByTimeAsync(9_999);
    expect(queue.starts).toBe(5);
    await vi.advanceTimersByTimeAsync(1);
    expect(queue.starts).toBe(6);
  });

  it('scans once per round whichever replica starts it, opens no queue while no endpoint exists, and stops', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
    let t = T0;
    const now = () => t;
    const store = new MemoryWebhookStore(now);
    const [qa, qb] = [new FlakyQueue(0), new FlakyQueue(0)];
    const a = replica(store, qa, now);
    const b = replica(store, qb, now);
    await a.scheduling.start();
    expect(qa.starts).toBe(0);
    await store.put(subscription('wh_s', ['key.expiring']));
    // The next round, reached by the two replicas a millisecond apart.
    t += 60_000;
    await vi.advanceTimersByTimeAsync(60_000);
    t += 1;
    await b.scheduling.start();
    expect([qa.starts, qb.starts]).toEqual([1, 1]);
    expect(a.scans.length + b.scans.length).toBe(1);
    await a.scheduling.stop();
    await b.scheduling.stop();
    t += 60_000;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(a.scans.length + b.scans.length).toBe(1);
    await a.scheduling.startWorking();
    expect(qa.starts).toBe(1);
  });

  it('starts nothing once stopped', async () => {
    const store = new MemoryWebhookStore(() => T0);
    const queue = new FlakyQueue(0);
    const { scheduling } = replica(store, queue, () => T0);
    await scheduling.stop();
    await scheduling.startWorking();
    expect(queue.starts).toBe(0);
  });

  it('forgets a start that failed, so the next asks again', async () => {
    const store = new MemoryWebhookStore(() => T0);
    const queue = new FlakyQueue(1);
    const { scheduling } = replica(store, queue, () => T0);
    await expect(scheduling.startWorking()).rejects.toThrow('Redis not ready');
    await scheduling.startWorking();
    await scheduling.startWorking();
    expect(queue.starts).toBe(2);
  });
});
