import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { CustomerResolver } from '../customers/customer-resolver.js';
import type { CustomerStore } from '../customers/customer-store.js';
import type { KeyResolver } from '../keys/key-resolver.js';
import type { KeyStore } from '../keys/key-store.js';
import type { GuardedLimiter } from '../limits/guarded-limiter.js';
import type { EventBus } from './event-bus.js';

export interface KeySyncOptions {
  events: EventBus;
  keyResolver: KeyResolver;
  keyStore: Pick<KeyStore, 'changedSince'>;
  customerResolver: CustomerResolver;
  customerStore: Pick<CustomerStore, 'changedSince'>;
  limiter: Pick<GuardedLimiter, 'forgetBan' | 'forgetBans' | 'recheckBans'>;
  now: () => number;
  pollMs: number;
}

/** Polls overlap by this much so a change stamped by a replica with a slower clock is not missed. */
const CLOCK_SLACK_MS = 30_000;

/**
 * Keeps this replica's key cache and ban knowledge in step with the others: events bring news
 * at once; the poll of the store's changed keys (updates, rotations, revocations) and of the bans
 * this replica remembers guarantees it within `pollMs` even when an event was lost (Redis down,
 * replica reconnecting, subscription lost).
 */
export const keySync = fp(
  async (app: FastifyInstance, opts: KeySyncOptions) => {
    const { events, keyResolver, keyStore, customerResolver, customerStore, limiter, pollMs, now } = opts;
    events.subscribe((event) => {
      if (event.type === 'key-revoked' || event.type === 'key-changed') keyResolver.evict(event.id);
      else if (event.type === 'customer-changed') customerResolver.evict(event.id);
      else if (event.type === 'ban-lifted') limiter.forgetBan(event.id);
      else limiter.forgetBans();
    });

    let since = new Date(now() - CLOCK_SLACK_MS);
    // Each poll overlaps the last by CLOCK_SLACK_MS, so a change comes back poll after poll for
    // that long: it is evicted once (by id and updatedAt), not once per poll, which would send a
    // busy key back to the store every pollMs. (A lookup an eviction overtook is not cached: see
    // KeyResolver.evictions.)
    const evicted = new Map<string, string>();
    /** The same for customers (ids never clash with keys', but the maps stay apart for clarity). */
    const evictedCustomers = new Map<string, string>();
    const evictChanged = (
      changed: ReadonlyArray<{ id: string; updatedAt?: string | undefined }>,
      seen: Map<string, string>,
      evict: (id: string) => void,
    ) => {
      for (const { id, updatedAt } of changed) {
        if (updatedAt !== undefined) {
          if (seen.get(id) === updatedAt) continue;
          seen.set(id, updatedAt);
        }
        evict(id);
      }
    };
    let timer: NodeJS.Timeout | undefined;
    let polling = false;
    const poll = async () => {
      if (polling) return;
      polling = true;
      const started = now();
      try {
        const [keys, customers] = await Promise.all([keyStore.changedSince(since), customerStore.changedSince(since)]);
        evictChanged(keys, evicted, (id) => keyResolver.evict(id));
        evictChanged(customers, evictedCustomers, (id) => customerResolver.evict(id));
        since = new Date(started - CLOCK_SLACK_MS);
        for (const seen of [evicted, evictedCustomers]) {
          for (const [id, updatedAt] of seen) if (Date.parse(updatedAt) < since.getTime()) seen.delete(id);
        }
      } catch (err) {
        app.log.warn({ err }, 'key change poll failed; will retry');
      }
      try {
        // A ban lift whose event this replica missed: the key store knows nothing of bans.
        await limiter.recheckBans();
      } catch (err) {
        app.log.warn({ err }, 'ban recheck failed; will retry');
      } finally {
        polling = false;
      }
    };
    app.addHook('onReady', async () => {
      timer = setInterval(poll, pollMs);
      timer.unref();
    });
    app.addHook('onClose', async () => {
      if (timer) clearInterval(timer);
    });
  },
  { name: 'key-sync' },
);

/**
 * After a key changed in the store: this replica forgets it at once, the others when the event
 * reaches them (or, if it is lost, at their next poll). Publishing is best effort for that reason.
 */
export async function announceKeyChange(
  deps: { keyResolver: KeyResolver; events: EventBus },
  type: 'key-changed' | 'key-revoked',
  id: string,
  log: FastifyBaseLogger,
): Promise<void> {
  deps.keyResolver.evict(id);
  await deps.events.publish({ type, id }).catch((err) => {
    log.warn({ err, keyId: id }, 'key change not published; replicas learn of it by polling the key store');
  });
}

/** After a customer changed or was deleted: as announceKeyChange, for the customer cache. */
export async function announceCustomerChange(
  deps: { customerResolver: CustomerResolver; events: EventBus },
  id: string,
  log: FastifyBaseLogger,
): Promise<void> {
  deps.customerResolver.evict(id);
  await deps.events.publish({ type: 'customer-changed', id }).catch((err) => {
    log.warn({ err, customerId: id }, 'customer change not published; replicas learn of it by polling the store');
  });
}
