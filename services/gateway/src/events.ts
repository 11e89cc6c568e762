import { EventEmitter } from 'node:events';
import type { RedisClient } from './redis/clients.js';

/**
 * What one replica tells the others: a key was revoked, a key changed (plan, limits, name,
 * expiry, secret), or a key's ban was lifted. `missed-events` is local only: this replica's
 * subscription was down, so it may have missed some of them.
 */
export type GatewayEvent =
  | { type: 'key-revoked'; id: string }
  | { type: 'key-changed'; id: string }
  | { type: 'ban-lifted'; id: string }
  | { type: 'missed-events' };

export interface EventBus {
  publish(event: GatewayEvent): Promise<void>;
  subscribe(handler: (event: GatewayEvent) => void): void;
  close(): Promise<void>;
}

/** One process: the embedded mode, where every "replica" is this process. */
export class LocalEventBus implements EventBus {
  private readonly emitter = new EventEmitter();
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
    const typed = event.type === 'key-revoked' || event.type === 'key-changed' || event.type === 'ban-lifted';
    if (typed && typeof event.id === 'string') {
      return event as GatewayEvent;
    }
  } catch {
    // A foreign or garbled message on our channel is ignored, not fatal.
  }
  return null;
}

/**
 * Calls `gap` whenever the subscription may have missed messages: a standalone or Sentinel
 * connection is ready again (after a Sentinel failover it is the new master's), or a Cluster node
 * left the topology. ioredis moves a Cluster subscription to another node on its own and does not
 * say so, and any departed node may have been the subscribed one; a gap that was none costs one
 * Redis call per banned key.
 */
function onSubscriptionGap(subscriber: RedisClient, gap: () => void): void {
  // A client made before this bus may be connected already: its next ready is a reconnect.
  let connectedBefore = subscriber.status === 'ready';
  subscriber.on('ready', () => {
    if (connectedBefore) gap();
    connectedBefore = true;
  });
  if (subscriber.isCluster) subscriber.on('-node', gap);
}

/**
 * Redis pub/sub between replicas. Delivery is best effort (a replica that is disconnected misses
 * messages), so key changes also ride on keySync's poll of the key store, and bans on their TTL.
 */
export class RedisEventBus implements EventBus {
  private readonly handlers: Array<(event: GatewayEvent) => void> = [];

  constructor(
    private readonly publisher: RedisClient,
    subscriber: RedisClient,
    private readonly channel: string,
    onError: (err: unknown) => void,
  ) {
    subscriber.on('message', (ch: string, message: string) => {
      if (ch !== channel) return;
      const event = parseEvent(message);
      if (event) for (const handler of this.handlers) handler(event);
    });
    subscriber.subscribe(channel).catch(onError);
    // Pub/sub keeps nothing for a disconnected subscriber. After a gap (ioredis subscribes again
    // by itself) this replica may have missed lifted bans: say so, so it drops what it remembers
    // and asks Redis again. Revocations are covered by the key store poll too.
    onSubscriptionGap(subscriber, () => {
      for (const handler of this.handlers) handler({ type: 'missed-events' });
    });
  }

  async publish(event: GatewayEvent): Promise<void> {
    await this.publisher.publish(this.channel, JSON.stringify(event));
  }

  subscribe(handler: (event: GatewayEvent) => void): void {
    this.handlers.push(handler);
  }

  async close(): Promise<void> {
    this.handlers.length = 0;
  }
}
