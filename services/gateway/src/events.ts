import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';

/**
 * What one replica tells the others: a key was revoked, or a key's ban was lifted. `missed-events`
 * is local only: this replica's subscription was down, so it may have missed some of them.
 */
export type GatewayEvent =
  | { type: 'key-revoked'; id: string; sha256?: string }
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
    if ((event.type === 'key-revoked' || event.type === 'ban-lifted') && typeof event.id === 'string') {
      return event as GatewayEvent;
    }
  } catch {
    // A foreign or garbled message on our channel is ignored, not fatal.
  }
  return null;
}

/**
 * Redis pub/sub between replicas. Delivery is best effort (a replica that is disconnected misses
 * messages), so revocation also rides on the key cache's revocation watcher and bans on their TTL.
 */
export class RedisEventBus implements EventBus {
  private readonly handlers: Array<(event: GatewayEvent) => void> = [];

  constructor(
    private readonly publisher: Redis,
    subscriber: Redis,
    private readonly channel: string,
    onError: (err: unknown) => void,
  ) {
    subscriber.on('message', (ch: string, message: string) => {
      if (ch !== channel) return;
      const event = parseEvent(message);
      if (event) for (const handler of this.handlers) handler(event);
    });
    subscriber.subscribe(channel).catch(onError);
    // Pub/sub keeps nothing for a disconnected subscriber. After a reconnect (ioredis subscribes
    // again by itself) this replica may have missed lifted bans: say so, so it drops what it
    // remembers and asks Redis again. Revocations are covered by the key store poll too.
    let connectedBefore = false;
    subscriber.on('ready', () => {
      if (connectedBefore) for (const handler of this.handlers) handler({ type: 'missed-events' });
      connectedBefore = true;
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
