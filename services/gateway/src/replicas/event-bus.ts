import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { RedisClient } from '../redis/clients.js';

/**
 * What one replica tells the others: a key was revoked, a key changed (plan, limits, name,
 * expiry, secret), a key's ban was lifted, or a customer changed or was deleted (its keys' shared
 * windows and calendar come from it). `missed-events` is local only: this replica's subscription
 * was down, so it may have missed some of them.
 */
export type GatewayEvent =
  | { type: 'key-revoked'; id: string }
  | { type: 'key-changed'; id: string }
  | { type: 'ban-lifted'; id: string }
  | { type: 'customer-changed'; id: string }
  | { type: 'missed-events' };

export interface EventBus {
  /** Whether events published by other replicas reach this one, as far as it knows. */
  readonly isSubscribed: boolean;
  publish(event: GatewayEvent): Promise<void>;
  subscribe(handler: (event: GatewayEvent) => void): void;
  close(): Promise<void>;
}

/** One process: the embedded mode, where every "replica" is this process. */
export class LocalEventBus implements EventBus {
  private readonly emitter = new EventEmitter();
  readonly isSubscribed = true;
  async publish(event: GatewayEvent): Promise<void> {
    this.emitter.emit('event', event);
  }
  subscribe(handler: (event: GatewayEvent) => void): void {
    this.emitter.on('event', handler);
  }
  async close(): Promise<void> {
    this.emitter.removeAllListeners();
  }
}

function parseEvent(message: string): GatewayEvent | null {
  try {
    const event = JSON.parse(message) as Partial<GatewayEvent>;
    const typed =
      event.type === 'key-revoked' ||
      event.type === 'key-changed' ||
      event.type === 'ban-lifted' ||
      event.type === 'customer-changed';
    if (typed && typeof event.id === 'string') {
      return event as GatewayEvent;
    }
  } catch {
    // A foreign or garbled message on our channel is ignored, not fatal.
  }
  return null;
}

/** What an operator hears about the subscription (deps.ts turns these into a gauge and log lines). */
export interface SubscriptionHooks {
  /** Messages arrive: the first time, or `again` after a loss. */
  onUp(again: boolean): void;
  /** Messages may not arrive (or never did); `reason` says what was seen. */
  onDown(reason: string): void;
}

/** How often a replica checks, with a message of its own, that its subscription still delivers. */
const PROBE_MS = 5_000;

/** The first wait before a failed SUBSCRIBE is sent again (see retrySoon). */
const RETRY_MS = 250;

/** A replica's own probe on the events channel: `{"probe":"<replica id>:<n>"}`. Others ignore it. */
const PROBE_PREFIX = '{"probe":"';

/**
 * Redis pub/sub between replicas. Delivery is best effort (a replica that is disconnected misses
 * messages), so key changes also ride on keySync's poll of the key store, and bans on the poll's
 * recheck and their TTL.
 *
 * The bus owns its subscription instead of trusting ioredis to keep it: it subscribes only once
 * the connection is ready, again on every reconnect, and retries a SUBSCRIBE that failed. A
 * SUBSCRIBE sent while the connection's ready check was still running was lost on the reconnect
 * that followed, and ioredis had no record of it to resubscribe, so the replica heard nothing and
 * said nothing. A probe it publishes to itself every `probeMs` proves delivery end to end, which
 * also covers a Cluster moving its subscriber connection to another node without a word.
 */
export class RedisEventBus implements EventBus {
  private readonly handlers: Array<(event: GatewayEvent) => void> = [];
  private readonly replica = randomBytes(8).toString('hex');
  private readonly timer: NodeJS.Timeout;
  /** `starting` until the first SUBSCRIBE or probe settles it. */
  private state: 'starting' | 'up' | 'down' = 'starting';
  private subscribing = false;
  private retries = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Probes numbered as sent; the highest whose PUBLISH Redis accepted; the highest seen back. */
  private probeNumber = 0;
  private probesPublished = 0;
  private probesSeen = 0;
  /** Down because a probe did not come back: only a returning probe, not a SUBSCRIBE reply, says it is up. */
  private deliveryDoubted = false;
  private readonly onReady = () => this.subscribeChannel();
  private readonly onClose = () => {
    // A new connection's SUBSCRIBE reply is good evidence again.
    this.deliveryDoubted = false;
    this.down('the connection closed');
  };
  private readonly onNodeLeft = () => this.emit({ type: 'missed-events' });
  private readonly onMessage = (ch: string, message: string) => {
    if (ch !== this.channel) return;
    if (message.startsWith(PROBE_PREFIX)) return this.probeSeen(message);
    const event = parseEvent(message);
    if (event) this.emit(event);
  };

  constructor(
    private readonly publisher: RedisClient,
    private readonly subscriber: RedisClient,
    private readonly channel: string,
    private readonly hooks: SubscriptionHooks,
    private readonly probeMs = PROBE_MS,
  ) {
    subscriber.on('message', this.onMessage);
    // Every (re)connection of a standalone or Sentinel client; a Cluster's when it is (re)built.
    subscriber.on('ready', this.onReady);
    subscriber.on('close', this.onClose);
    // ioredis moves a Cluster subscription off a node that left and says nothing: that node may
    // have been the subscribed one, so what this replica remembers of bans may be stale.
    if (subscriber.isCluster) subscriber.on('-node', this.onNodeLeft);
    if (subscriber.status === 'ready') this.subscribeChannel();
    this.timer = setInterval(() => this.probe(), probeMs);
    this.timer.unref();
  }

  /** Read by the tests and by nothing on the request path: the gauge is what operators watch. */
  get isSubscribed(): boolean {
    return this.state === 'up';
  }

  async publish(event: GatewayEvent): Promise<void> {
    await this.publisher.publish(this.channel, JSON.stringify(event));
  }

  subscribe(handler: (event: GatewayEvent) => void): void {
    this.handlers.push(handler);
  }

  private subscribeChannel(): void {
    if (this.subscribing || this.closed) return;
    this.subscribing = true;
    this.subscriber.subscribe(this.channel).then(
      () => {
        this.subscribing = false;
        this.retries = 0;
        if (!this.deliveryDoubted) this.up();
      },
      (err: Error) => {
        this.subscribing = false;
        this.down(`SUBSCRIBE failed: ${err.message}`);
        this.retrySoon();
      },
    );
  }

  /**
   * A failed SUBSCRIBE is tried again after RETRY_MS, doubled at each failure up to the probe
   * period (whose round tries too), so a replica is not deaf for a whole period after one refusal.
   */
  private retrySoon(): void {
    if (this.closed || this.retryTimer) return;
    const wait = Math.min(RETRY_MS * 2 ** this.retries, this.probeMs);
    this.retries++;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.state !== 'up' && this.subscriber.status === 'ready') this.subscribeChannel();
    }, wait);
    this.retryTimer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    clearTimeout(this.retryTimer);
    this.subscriber.off('message', this.onMessage);
    this.subscriber.off('ready', this.onReady);
    this.subscriber.off('close', this.onClose);
    this.subscriber.off('-node', this.onNodeLeft);
    this.handlers.length = 0;
  }

  private emit(event: GatewayEvent): void {
    for (const handler of this.handlers) handler(event);
  }

  private up(): void {
    if (this.state === 'up' || this.closed) return;
    const again = this.state === 'down';
    this.state = 'up';
    // Probes published while it was down could not come back: they prove nothing now.
    this.probesSeen = Math.max(this.probesSeen, this.probesPublished);
    // Pub/sub keeps nothing for a disconnected subscriber: lifted bans published meanwhile are
    // lost, so this replica drops what it remembers and asks Redis again.
    if (again) this.emit({ type: 'missed-events' });
    this.hooks.onUp(again);
  }

  private down(reason: string): void {
    if (this.state === 'down' || this.closed) return;
    this.state = 'down';
    this.hooks.onDown(reason);
  }

  private probe(): void {
    if (this.state === 'up' && this.probesSeen < this.probesPublished) {
      this.deliveryDoubted = true;
      this.down('a probe message did not come back');
    }
    // A failed SUBSCRIBE, or a subscription lost without a reconnect (a Cluster node): try again.
    if (this.state !== 'up' && this.subscriber.status === 'ready') this.subscribeChannel();
    const n = ++this.probeNumber;
    this.publisher.publish(this.channel, `${PROBE_PREFIX}${this.replica}:${n}"}`).then(
      () => {
        // Only a probe Redis took is expected back: a failing publisher says nothing of delivery.
        this.probesPublished = Math.max(this.probesPublished, n);
      },
      () => {
        // Redis is unreachable: the connection's own events and the next probe say so.
      },
    );
  }

  private probeSeen(message: string): void {
    const body = message.slice(PROBE_PREFIX.length, -2);
    const colon = body.indexOf(':');
    if (body.slice(0, colon) !== this.replica) return;
    this.probesSeen = Math.max(this.probesSeen, Number(body.slice(colon + 1)));
    this.deliveryDoubted = false;
    this.up();
  }
}
