import { type Job, Queue, Worker } from 'bullmq';
import type { RedisClient } from '../../redis/clients.js';
import type { DeliveryJob, DeliveryQueue, QueueHandlers, QueueStats, RetrySchedule } from './delivery-queue.js';
import { retryDelayMs } from './delivery-queue.js';

const QUEUE = 'deliveries';
/** Far more than any retry period needs: the handler ends a delivery by time (WEBHOOKS_RETRY_FOR_SECONDS), not by count. */
const MAX_ATTEMPTS = 100_000;
const CLOSE_WAIT_MS = 5_000;

export interface BullmqQueueOptions {
  /** A new connection each call, in BullMQ's terms (redis/clients.ts queueConnection). */
  connect: () => RedisClient;
  /** The gateway's REDIS_PREFIX; BullMQ's keys go under `{<prefix>webhooks}`, one Cluster slot. */
  prefix: string;
  retry: RetrySchedule;
  concurrency?: number;
}

/**
 * Deliveries in BullMQ on the gateway's Redis: they survive a restart or a SIGKILL (a job taken by
 * a replica that died is taken again once its lock lapses), any replica makes them, and a job id
 * already queued is not queued again.
 */
export class BullmqDeliveryQueue implements DeliveryQueue {
  readonly kind = 'redis (BullMQ)';
  private opened: Queue | undefined;
  private readonly connections: RedisClient[] = [];
  private worker: Worker | undefined;

  constructor(private readonly options: BullmqQueueOptions) {}

  /**
   * Opened at first use: a gateway with no endpoint never opens BullMQ's connections nor loads its
   * scripts (a cost at start that every replica and test gateway would otherwise pay).
   */
  private get queue(): Queue {
    if (this.opened) return this.opened;
    const queue = new Queue(QUEUE, {
      connection: this.connection(),
      prefix: `{${this.options.prefix}webhooks}`,
      defaultJobOptions: {
        attempts: MAX_ATTEMPTS,
        backoff: { type: 'webhook' },
        // Kept a while after, so a repeat of the same job id within that time is still refused.
        removeOnComplete: { age: 3_600, count: 10_000 },
        removeOnFail: { age: 7 * 86_400 },
      },
    });
    queue.on('error', () => {});
    this.opened = queue;
    return queue;
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
    const { baseMs, maxMs, random } = this.options.retry;
    this.worker = new Worker(QUEUE, (job: Job) => handlers.deliver(job.data as DeliveryJob, job.attemptsMade + 1), {
      connection: this.connection(),
      prefix: `{${this.options.prefix}webhooks}`,
      concurrency: this.options.concurrency ?? 8,
      settings: { backoffStrategy: (attemptsMade: number) => retryDelayMs(attemptsMade, baseMs, maxMs, random) },
    });
    this.worker.on('error', () => {});
  }

  async stats(): Promise<QueueStats> {
    // A replica that knows of no endpoint has nothing queued to report.
    if (!this.opened) return { depth: 0, oldestEnqueuedAt: null };
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

  /**
   * Lets the attempts under way finish, for at most CLOSE_WAIT_MS: with Redis down BullMQ's close
   * would wait for it forever. A delivery cut short is taken again by a replica once its lock lapses.
   */
  async close(): Promise<void> {
    const graceful = (async () => {
      await this.worker?.close();
      await this.opened?.close();
    })().catch(() => {});
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, CLOSE_WAIT_MS);
    });
    await Promise.race([graceful, late]);
    clearTimeout(timer);
    for (const connection of this.connections) connection.disconnect();
  }
}
