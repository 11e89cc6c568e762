import type { DeliveryJob, DeliveryQueue, QueueHandlers, QueueStats, RetrySchedule } from './delivery-queue.js';
import { retryDelayMs } from './delivery-queue.js';

interface Pending {
  job: DeliveryJob;
  attempt: number;
  timer?: NodeJS.Timeout;
}

/**
 * Embedded mode (no Redis): deliveries wait in this process's memory, so a restart loses them,
 * and only this process makes them. The start-up log says so.
 */
export class MemoryDeliveryQueue implements DeliveryQueue {
  readonly kind = 'memory';
  private readonly pending = new Map<string, Pending>();
  private readonly running = new Set<Promise<void>>();
  private handlers: QueueHandlers | undefined;
  private closed = false;

  constructor(private readonly retry: RetrySchedule) {}

  async add(job: DeliveryJob, jobId: string): Promise<void> {
    if (this.closed || this.pending.has(jobId)) return;
    const entry: Pending = { job, attempt: 1 };
    this.pending.set(jobId, entry);
    if (this.handlers) this.schedule(jobId, entry, 0);
  }

  async start(handlers: QueueHandlers): Promise<void> {
    this.handlers = handlers;
    for (const [id, entry] of this.pending) this.schedule(id, entry, 0);
  }

  private track(work: Promise<void>): void {
    this.running.add(work);
    void work.finally(() => this.running.delete(work));
  }

  private schedule(id: string, entry: Pending, delayMs: number): void {
    entry.timer = setTimeout(() => this.track(this.attempt(id, entry)), delayMs);
  }

  private async attempt(id: string, entry: Pending): Promise<void> {
    if (this.closed || !this.handlers) return;
    try {
      await this.handlers.deliver(entry.job, entry.attempt);
      this.pending.delete(id);
    } catch {
      // Any failure is retried (RetryDelivery, or a store that could not be read); giving up is
      // the handler's call, made by returning.
      if (this.closed) return;
      const delay = retryDelayMs(entry.attempt, this.retry.baseMs, this.retry.maxMs, this.retry.random);
      entry.attempt += 1;
      this.schedule(id, entry, delay);
    }
  }

  async stats(): Promise<QueueStats> {
    let oldest: number | null = null;
    for (const { job } of this.pending.values()) {
      if (oldest === null || job.enqueuedAt < oldest) oldest = job.enqueuedAt;
    }
    return { depth: this.pending.size, oldestEnqueuedAt: oldest };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const entry of this.pending.values()) clearTimeout(entry.timer);
    await Promise.allSettled([...this.running]);
  }
}
