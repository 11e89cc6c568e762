import type { FastifyBaseLogger } from 'fastify';
import type { DeliveryQueue, QueueHandlers } from './delivery/delivery-queue.js';
import type { WebhookStore } from './subscriptions/webhook-store.js';

/**
 * How soon a round that failed before deliveries started (endpoints unreadable, the queue not
 * opened: Redis not ready or down) is tried again; doubled each time up to the scan period.
 */
const START_RETRY_MS = 1_000;

export interface SchedulingParts {
  /** WEBHOOKS_EXPIRY_SCAN_SECONDS, in ms. */
  expiryScanMs: number;
  store: WebhookStore;
  queue: DeliveryQueue;
  /** What the queue calls for each attempt. */
  handlers: QueueHandlers;
  /** The expiry scan one replica runs per round. */
  scan: () => Promise<void>;
  logger: FastifyBaseLogger;
  now: () => number;
}

/**
 * When this replica works: the rounds of the expiry scan, and the start of deliveries once an
 * endpoint exists. Stops with stop(), after which nothing starts again.
 */
export class Scheduling {
  private scanTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private scanning: Promise<void> = Promise.resolve();
  private working: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly parts: SchedulingParts) {}

  /**
   * Starts this replica's work: deliveries, and the expiry scan every WEBHOOKS_EXPIRY_SCAN_SECONDS,
   * which one replica per round runs (the first to take the round's marker).
   */
  async start(): Promise<void> {
    const { expiryScanMs: every, store, logger, now, scan } = this.parts;
    let retryMs = START_RETRY_MS;
    const round = () => {
      const slot = Math.floor(now() / every);
      this.scanning = (async () => {
        // Nothing to do, and no queue to open, while no endpoint exists.
        if (this.closed || (await store.list()).length === 0) return;
        await this.startWorking();
        if (await store.once(`scan.${slot}`, every)) await scan();
      })().catch((err) => {
        logger.warn({ err }, 'webhooks: expiry scan failed');
        // At start the Redis connection may not be ready yet: without a retry, a replica that
        // restarts with deliveries waiting would make none until the next round (5 min by default).
        if (!this.working && !this.closed) {
          clearTimeout(this.retryTimer);
          this.retryTimer = setTimeout(round, retryMs);
          this.retryTimer.unref();
          retryMs = Math.min(retryMs * 2, every);
        }
      });
    };
    this.scanTimer = setInterval(round, every);
    this.scanTimer.unref();
    round();
    await this.scanning;
  }

  /**
   * Starts making deliveries on this replica, once an endpoint exists: at start, when one is
   * added here, or at the next scan round after another replica added one.
   */
  async startWorking(): Promise<void> {
    if (this.closed) return;
    // A start that failed is forgotten, so the next round or endpoint tries it again.
    this.working ??= this.parts.queue.start(this.parts.handlers).catch((err: unknown) => {
      this.working = undefined;
      throw err;
    });
    await this.working;
  }

  /** No more rounds; waits for the one under way. */
  async stop(): Promise<void> {
    this.closed = true;
    clearInterval(this.scanTimer);
    clearTimeout(this.retryTimer);
    await this.scanning;
  }
}
