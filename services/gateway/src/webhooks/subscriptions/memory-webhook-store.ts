import { takeMarker } from '../../replicas/markers.js';
import type { DeliveryAttempt, FenceState, QueueFence, Subscription, WebhookStore } from './webhook-store.js';
import { MAX_ATTEMPTS } from './webhook-store.js';

/** Embedded mode: subscriptions last as long as the process. */
export class MemoryWebhookStore implements WebhookStore {
  readonly kind = 'memory';
  private readonly subscriptions = new Map<string, Subscription>();
  private readonly attemptLog = new Map<string, DeliveryAttempt[]>();
  private readonly markers = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  async put(subscription: Subscription): Promise<void> {
    this.subscriptions.set(subscription.id, structuredClone(subscription));
  }

  async add(subscription: Subscription): Promise<boolean> {
    if (this.subscriptions.has(subscription.id)) return false;
    await this.put(subscription);
    return true;
  }

  async get(id: string): Promise<Subscription | null> {
    const found = this.subscriptions.get(id);
    return found ? structuredClone(found) : null;
  }

  async list(): Promise<Subscription[]> {
    return [...this.subscriptions.values()].map((s) => structuredClone(s));
  }

  async remove(id: string): Promise<boolean> {
    this.attemptLog.delete(id);
    return this.subscriptions.delete(id);
  }

  async recordAttempt(id: string, attempt: DeliveryAttempt): Promise<void> {
    const log = this.attemptLog.get(id) ?? [];
    log.unshift({ ...attempt });
    log.length = Math.min(log.length, MAX_ATTEMPTS);
    this.attemptLog.set(id, log);
  }

  async attempts(id: string): Promise<DeliveryAttempt[]> {
    return (this.attemptLog.get(id) ?? []).map((a) => ({ ...a }));
  }

  async once(marker: string, ttlMs: number): Promise<boolean> {
    return takeMarker(this.markers, marker, this.now(), ttlMs);
  }

  /** In one process a call that failed queued nothing that outlives it: no fence. */
  async fencedQueue(
    _marker: string,
    _waitMs: number,
    _ttlMs: number,
    queue: (fence: QueueFence | null) => Promise<void>,
  ): Promise<void> {
    await queue(null);
  }

  async fenceState(_fence: QueueFence): Promise<FenceState> {
    return 'confirmed';
  }
}
