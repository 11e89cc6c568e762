import { randomUUID } from 'node:crypto';
import { RedisProcess, startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import { Queue } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { queueConnection, type RedisClient } from '../../src/redis/clients.js';
import { BullmqDeliveryQueue } from '../../src/webhooks/delivery/bullmq-delivery-queue.js';
import {
  type DeliveryJob,
  type DeliveryQueue,
  RetryDelivery,
  retryDelayMs,
} from '../../src/webhooks/delivery/delivery-queue.js';
import { MemoryDeliveryQueue } from '../../src/webhooks/delivery/memory-delivery-queue.js';

/**
 * The retry schedule as docs/webhooks.md documents it (WEBHOOKS_RETRY_BASE_MS, WEBHOOKS_RETRY_MAX_DELAY_MS):
 * the n-th retry waits base·2^(n−1), capped at the maximum, between half and all of it at random.
 * The jitter is fixed at either end here, so each wait is exact.
 */
const full = (retry: number, baseMs: number, maxMs: number): number => Math.min(maxMs, baseMs * 2 ** (retry - 1));
const JITTER = {
  /** The shortest wait: half. */
  lowest: { random: () => 0, part: 0.5 },
  /** The longest: all of it (random() stays below 1). */
  highest: { random: () => 1 - Number.EPSILON, part: 1 },
};

const job = (): DeliveryJob => ({
  subscriptionId: 'wh_test',
  eventId: `msg_${randomUUID()}`,
  event: { type: 'webhook.test', timestamp: new Date().toISOString(), data: {} },
  enqueuedAt: Date.now(),
});

/** Starts the queue on an endpoint that always fails and queues one delivery (id `j1`); returns its attempts so far. */
async function failingDelivery(queue: DeliveryQueue): Promise<number[]> {
  const attempts: number[] = [];
  await queue.start({
    deliver: async (_job, attempt) => {
      attempts.push(attempt);
      throw new RetryDelivery('endpoint answered 503');
    },
  });
  await queue.add(job(), 'j1');
  return attempts;
}

describe('the retry schedule', () => {
  it.each(Object.entries(JITTER))(
    'doubles from the base to the maximum (jitter at its %s)',
    (_end, { random, part }) => {
      // The defaults: 5 s doubling to 1 h, reached at the 11th retry.
      const waits = Array.from({ length: 12 }, (_, i) => retryDelayMs(i + 1, 5_000, 3_600_000, random));
      expect(waits).toEqual(
        [5, 10, 20, 40, 80, 160, 320, 640, 1_280, 2_560, 3_600, 3_600].map((s) => Math.round(s * 1_000 * part)),
      );
      expect(retryDelayMs(60, 20, 100, random)).toBe(Math.round(100 * part));
    },
  );

  it('waits at least a millisecond', () => {
    expect(retryDelayMs(1, 1, 1, JITTER.lowest.random)).toBe(1);
  });
});

describe('the memory queue (embedded mode)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it.each(Object.entries(JITTER))(
    'makes each retry exactly its wait after the failure before (jitter at its %s)',
    async (_end, { random, part }) => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const retry = { baseMs: 1_000, maxMs: 4_000, random };
      const queue = new MemoryDeliveryQueue(retry);
      onTestFinished(() => queue.close());
      const attempts = await failingDelivery(queue);
      await vi.advanceTimersByTimeAsync(0);
      expect(attempts).toEqual([1]);
      for (let retryNo = 1; retryNo <= 4; retryNo++) {
        const wait = Math.round(full(retryNo, retry.baseMs, retry.maxMs) * part);
        await vi.advanceTimersByTimeAsync(wait - 1);
        expect(attempts, `retry ${retryNo} after ${wait - 1} ms`).toHaveLength(retryNo);
        await vi.advanceTimersByTimeAsync(1);
        expect(attempts, `retry ${retryNo} after ${wait} ms`).toHaveLength(retryNo + 1);
      }
      expect(attempts).toEqual([1, 2, 3, 4, 5]);
    },
  );
});

describe('the memory queue’s bookkeeping', () => {
  const retry = { baseMs: 60_000, maxMs: 60_000 };
  const at = (enqueuedAt: number): DeliveryJob => ({ ...job(), enqueuedAt });

  it('reports what waits and since when, takes an id once while it waits, and nothing once closed', async () => {
    const queue = new MemoryDeliveryQueue(retry);
    onTestFinished(() => queue.close());
    expect(await queue.stats()).toEqual({ depth: 0, oldestEnqueuedAt: null });
    await queue.add(at(2_000), 'j1');
    await queue.add(at(1_000), 'j2');
    await queue.add(at(3_000), 'j3');
    // The same id again while it waits: one delivery, as BullMQ keeps one job per id.
    await queue.add(at(500), 'j2');
    expect(await queue.stats()).toEqual({ depth: 3, oldestEnqueuedAt: 1_000 });

    const delivered: string[] = [];
    await queue.start({
      deliver: async (job) => {
        delivered.push(job.eventId);
      },
    });
    await vi.waitFor(() => expect(delivered).toHaveLength(3), { interval: 10 });
    expect(await queue.stats()).toEqual({ depth: 0, oldestEnqueuedAt: null });

    await queue.close();
    await queue.add(at(4_000), 'j4');
    expect(await queue.stats()).toEqual({ depth: 0, oldestEnqueuedAt: null });
  });

  it('makes no retry once closed, and waits for the attempt under way', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    onTestFinished(() => void vi.useRealTimers());
    const queue = new MemoryDeliveryQueue({ baseMs: 1_000, maxMs: 1_000, random: () => 0 });
    let finish: () => void = () => {};
    const attempts: number[] = [];
    await queue.start({
      deliver: async (_job, attempt) => {
        attempts.push(attempt);
        if (attempt === 2) await new Promise<void>((resolve) => (finish = resolve));
        throw new RetryDelivery('endpoint answered 503');
      },
    });
    await queue.add(job(), 'j1');
    await vi.advanceTimersByTimeAsync(500);
    expect(attempts).toEqual([1, 2]);
    let closed = false;
    const closing = queue.close().then(() => {
      closed = true;
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(closed).toBe(false);
    finish();
    await closing;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(attempts).toEqual([1, 2]);
  });
});

describe('the BullMQ queue', () => {
  let redis: TestRedis | undefined;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it.each(Object.entries(JITTER))(
    'delays each retry by its wait after the failure before (jitter at its %s)',
    async (_end, { random, part }) => {
      if (!redis) throw new Error('no Redis');
      const target = { mode: 'standalone', url: redis.url } as const;
      const prefix = `wr${randomUUID().slice(0, 8)}:`;
      // Waits of minutes: each retry is read from the delayed job, then promoted to run at once.
      const retry = { baseMs: 60_000, maxMs: 240_000, random };
      const queue = new BullmqDeliveryQueue({ connect: () => queueConnection(target), prefix, retry });
      // The queue's own name and keys, read the way BullMQ keeps them.
      const inspect = new Queue('deliveries', { connection: queueConnection(target), prefix: `{${prefix}webhooks}` });
      onTestFinished(async () => {
        await queue.close();
        await inspect.close();
        await inspect.disconnect();
      });
      const attempts = await failingDelivery(queue);
      for (let retryNo = 1; retryNo <= 4; retryNo++) {
        const delayed = await vi.waitFor(
          async () => {
            const found = await inspect.getJob('j1');
            expect(await found?.getState()).toBe('delayed');
            expect(found?.attemptsMade).toBe(retryNo);
            return found;
          },
          { timeout: 10_000, interval: 20 },
        );
        expect(delayed?.delay, `retry ${retryNo}`).toBe(Math.round(full(retryNo, retry.baseMs, retry.maxMs) * part));
        await delayed?.promote();
      }
      expect(attempts).toEqual([1, 2, 3, 4]);
    },
  );
});

describe('the BullMQ queue’s jobs and figures', () => {
  let redis: TestRedis | undefined;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('counts what waits in every state and finds the oldest among many jobs; keeps a job an hour after it is done, a week after it failed', async () => {
    if (!redis) throw new Error('no Redis');
    const target = { mode: 'standalone', url: redis.url } as const;
    const prefix = `ws${randomUUID().slice(0, 8)}:`;
    const queue = new BullmqDeliveryQueue({
      connect: () => queueConnection(target),
      prefix,
      retry: { baseMs: 60_000, maxMs: 60_000 },
    });
    const inspect = new Queue('deliveries', { connection: queueConnection(target), prefix: `{${prefix}webhooks}` });
    onTestFinished(async () => {
      await queue.close();
      await inspect.close();
      await inspect.disconnect();
    });
    // Nothing opened yet: nothing waits.
    expect(await queue.stats()).toEqual({ depth: 0, oldestEnqueuedAt: null });
    const at = (enqueuedAt: number): DeliveryJob => ({ ...job(), enqueuedAt });
    await queue.add(at(800), 'j1');
    await queue.add(at(1_000), 'j2');
    await queue.add(at(2_000), 'j3');
    // The same id again: one job.
    await queue.add(at(500), 'j2');
    expect(await queue.stats()).toEqual({ depth: 3, oldestEnqueuedAt: 800 });
    const made = await inspect.getJob('j1');
    expect(made?.opts).toMatchObject({
      attempts: 100_000,
      backoff: { type: 'webhook' },
      removeOnComplete: { age: 3_600, count: 10_000 },
      removeOnFail: { age: 7 * 86_400 },
    });

    // One delivered, one waiting for its retry (delayed), one failing now: still two waiting.
    const attempts: string[] = [];
    await queue.start({
      deliver: async (delivery) => {
        attempts.push(delivery.eventId);
        if (delivery.enqueuedAt !== 800) throw new RetryDelivery('endpoint answered 503');
      },
    });
    await vi.waitFor(
      async () => expect(await inspect.getJobCounts('delayed', 'completed')).toEqual({ delayed: 2, completed: 1 }),
      { timeout: 10_000, interval: 20 },
    );
    // The oldest of those still waiting: the delivered one, older, no longer counts.
    expect(await queue.stats()).toEqual({ depth: 2, oldestEnqueuedAt: 1_000 });
  });

  it('finds the oldest among more jobs than it reads of each state (50)', async () => {
    if (!redis) throw new Error('no Redis');
    const target = { mode: 'standalone', url: redis.url } as const;
    const queue = new BullmqDeliveryQueue({
      connect: () => queueConnection(target),
      prefix: `wm${randomUUID().slice(0, 8)}:`,
      retry: { baseMs: 60_000, maxMs: 60_000 },
    });
    onTestFinished(() => queue.close());
    for (let i = 0; i < 51; i++) await queue.add({ ...job(), enqueuedAt: 1_000 + i }, `j${i}`);
    expect(await queue.stats()).toEqual({ depth: 51, oldestEnqueuedAt: 1_000 });
  });
});

describe('the BullMQ queue under way and closing', () => {
  let redis: TestRedis | undefined;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  /** Waits for each connection to end: ioredis ends one once its socket has closed. */
  async function ended(clients: RedisClient[]): Promise<void> {
    await vi.waitFor(() => expect(clients.map((c) => c.status)).toEqual(clients.map(() => 'end')), {
      timeout: 5_000,
      interval: 10,
    });
  }

  /** A queue on `url` whose every Redis connection is kept, to see what close leaves open. */
  function queueOn(url: string) {
    const target = { mode: 'standalone', url } as const;
    const prefix = `wc${randomUUID().slice(0, 8)}:`;
    const clients: RedisClient[] = [];
    const queue = new BullmqDeliveryQueue({
      connect: () => {
        const client = queueConnection(target);
        clients.push(client);
        return client;
      },
      prefix,
      retry: { baseMs: 60_000, maxMs: 60_000 },
    });
    const inspect = new Queue('deliveries', { connection: queueConnection(target), prefix: `{${prefix}webhooks}` });
    onTestFinished(async () => {
      await queue.close();
      await inspect.close();
      await inspect.disconnect();
    });
    return { queue, inspect, clients };
  }

  it('counts a job under way and one queued with a priority (by another producer) among what waits, the oldest of them', async () => {
    if (!redis) throw new Error('no Redis');
    const { queue, inspect } = queueOn(redis.url);
    const at = (enqueuedAt: number): DeliveryJob => ({ ...job(), enqueuedAt });
    await queue.add(at(3_000), 'j1');
    // The gateway gives no priority, but a job queued with one waits in a state of its own.
    await inspect.add('webhook.test', at(500), { jobId: 'p1', priority: 1 });
    expect(await inspect.getJobCounts('waiting', 'prioritized')).toEqual({ waiting: 1, prioritized: 1 });
    expect(await queue.stats()).toEqual({ depth: 2, oldestEnqueuedAt: 500 });

    // Both taken by a delivery that does not end until the test lets it: both under way (active).
    let finish = () => {};
    const held = new Promise<void>((resolve) => {
      finish = resolve;
    });
    await queue.start({ deliver: () => held });
    await vi.waitFor(async () => expect(await inspect.getJobCounts('active')).toEqual({ active: 2 }), {
      timeout: 10_000,
      interval: 20,
    });
    expect(await queue.stats()).toEqual({ depth: 2, oldestEnqueuedAt: 500 });
    finish();
    await vi.waitFor(async () => expect(await inspect.getJobCounts('completed')).toEqual({ completed: 2 }), {
      timeout: 10_000,
      interval: 20,
    });
    expect(await queue.stats()).toEqual({ depth: 0, oldestEnqueuedAt: null });
  });

  it.each([
    ['queued to and working', true, true],
    ['queued to only', true, false],
    ['working only', false, true],
  ])('ends every Redis connection it opened on close (%s)', async (_case, adds, works) => {
    if (!redis) throw new Error('no Redis');
    const { queue, clients } = queueOn(redis.url);
    // Nothing opened to read that nothing waits.
    expect(await queue.stats()).toEqual({ depth: 0, oldestEnqueuedAt: null });
    expect(clients).toHaveLength(0);
    // One connection for whatever is queued, one for the work.
    if (adds) {
      await queue.add(job(), 'j1');
      await queue.add(job(), 'j2');
    }
    if (works) await queue.start({ deliver: async () => {} });
    expect(clients.length).toBe(Number(adds) + Number(works));
    await queue.close();
    await ended(clients);
  });

  it('writes nothing to stderr when its Redis goes away: BullMQ prints an error it cannot hand to a listener', async () => {
    // Its own redis-server, killed by the test; no inspecting queue, which would print its own.
    const own = await RedisProcess.start();
    onTestFinished(() => own.stop());
    const target = { mode: 'standalone', url: own.url } as const;
    const clients: RedisClient[] = [];
    const queue = new BullmqDeliveryQueue({
      connect: () => {
        const client = queueConnection(target);
        clients.push(client);
        return client;
      },
      prefix: `we${randomUUID().slice(0, 8)}:`,
      retry: { baseMs: 60_000, maxMs: 60_000 },
    });
    await queue.add(job(), 'j1');
    await queue.start({ deliver: async () => {} });
    const failures = clients.map(() => 0);
    clients.forEach((client, i) => {
      client.on('error', () => {
        failures[i] = (failures[i] ?? 0) + 1;
      });
    });
    const stderr = vi.spyOn(console, 'error').mockImplementation(() => {});
    onTestFinished(() => stderr.mockRestore());
    await own.kill();
    // Every connection has failed to reconnect at least once: BullMQ heard each failure before
    // this test's listener did.
    await vi.waitFor(() => expect(failures.every((n) => n > 0)).toBe(true), { timeout: 10_000, interval: 20 });
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const closing = queue.close();
      await vi.advanceTimersByTimeAsync(5_000);
      await closing;
    } finally {
      vi.useRealTimers();
    }
    expect(stderr).not.toHaveBeenCalled();
  });

  it('waits up to 5 s for a delivery under way, then ends its connections all the same', async () => {
    if (!redis) throw new Error('no Redis');
    const { queue, inspect, clients } = queueOn(redis.url);
    let finish = () => {};
    const held = new Promise<void>((resolve) => {
      finish = resolve;
    });
    onTestFinished(finish);
    await queue.add(job(), 'j1');
    await queue.start({ deliver: () => held });
    await vi.waitFor(async () => expect(await inspect.getJobCounts('active')).toEqual({ active: 1 }), {
      timeout: 10_000,
      interval: 20,
    });
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      let closed = false;
      const closing = queue.close().then(() => {
        closed = true;
      });
      await vi.advanceTimersByTimeAsync(4_999);
      expect(closed).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      await closing;
    } finally {
      vi.useRealTimers();
    }
    await ended(clients);
  });
});
