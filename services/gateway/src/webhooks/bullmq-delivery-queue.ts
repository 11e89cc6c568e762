import { type Job, Queue, Worker } from 'bullmq';
import type { RedisClient } from '../redis/clients.js';
import type { DeliveryJob, DeliveryQueue, QueueHandlers, QueueStats } from './delivery-queue.js';
import { retryDelayMs } from './delivery-queue.js';

const QUEUE = 'deliveries';
/** Far more than any retry period needs: the handler ends a delivery by time (WEBHOOKS_RETRY_FOR_SECONDS), not by count. */
const MAX_ATTEMPTS = 100_000;

export interface BullmqQueueOptions {
  /** A new connection each call, in BullMQ's terms (redis/clients.ts queueConnection). */
  connect: () => RedisClient;
  /** The gateway's REDIS_PREFIX; BullMQ's keys go under `{<prefix>webhooks}`, one Cluster slot. */
  prefix: string;
  retry: { baseMs: number; maxMs: number };
  concurrency?: number;
}

/**
 * Deliveries in BullMQ on the gateway's Redis: they survive a restart or a SIGKILL (a job taken by
 * a replica that died is taken again once its lock lapses), any replica makes them, and a job id
 * already queued is not queued again.
 */
export class BullmqDeliveryQueue implements DeliveryQueue {
  readonly kind = 'redis (BullMQ)';
  private readonly queue: Queue;
  private readonly connections: RedisClient[] = [];
  private worker: Worker | undefined;

  constructor(private readonly options: BullmqQueueOptions) {
    this.queue = new Queue(QUEUE, {
      connection: this.connection(),
      prefix: `{${options.prefix}webhooks}`,
      defaultJobOptions: {
        attempts: MAX_ATTEMPTS,
        backoff: { type: 'webhook' },
        // Kept a while after, so a repeat of the same job id within that time is still refused.
        removeOnComplete: { age: 3_600, count: 10_000 },
        removeOnFail: { age: 7 * 86_400 },
      },
    });
    this.queue.on('error', () => {});
  }

  private connection(): RedisClient {
    const client = this.options.connect();
    this.connections.push(client);
    return client;
  }

  async add(job: DeliveryJob, jobId: string): Promise<void> {
    await this.queue.add(job.event.type, job, { jobId });
  }

  async start(handlers: QueueHandlers): Promise<void> {
    const { baseMs, maxMs } = this.options.retry;
    this.worker = new Worker(QUEUE, (job: Job) => handlers.deliver(job.data as DeliveryJob, job.attemptsMade + 1), {
      connection: this.connection(),
      prefix: `{${this.options.prefix}webhooks}`,
      concurrency: this.options.concurrency ?? 8,
      settings: { backoffStrategy: (attemptsMade: number) => retryDelayMs(attemptsMade, baseMs, maxMs) },
    });
    this.worker.on('error', () => {});
  }

  async stats(): Promise<QueueStats> {
    const counts = await this.queue.getJobCounts('waiting', 'delayed', 'active', 'prioritized');
    const depth = Object.values(counts).reduce((a, b) => a + b, 0);
    if (depth === 0) return { depth: 0, oldestEnqueuedAt: null };
    // The oldest few of each state are enough: delayed jobs are ordered by when they run next.
    const jobs = await this.queue.getJobs(['waiting', 'delayed', 'active', 'prioritized'], 0, 49, true);
    let oldest: number | null = null;
    for (const job of jobs) {
      if (!job) continue;
      const at = (job.data as DeliveryJob).enqueuedAt ?? job.timestamp;
      if (oldest === null || at < oldest) oldest = at;
    }
    return { depth, oldestEnqueuedAt: oldest };
  }

  async close(): Promise<void> {
    await this.worker?.close();
    await this.queue.close();
    await Promise.allSettled(this.connections.map((c) => c.quit()));
  }
}
