import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { KeyResolver } from '../keys/key-resolver.js';
import type { KeyStore } from '../keys/key-store.js';
import type { GuardedLimiter } from '../limits/guarded-limiter.js';
import type { EventBus } from './event-bus.js';

export interface KeySyncOptions {
  events: EventBus;
  keyResolver: KeyResolver;
  keyStore: Pick<KeyStore, 'changedSince'>;
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
    const { events, keyResolver, keyStore, limiter, pollMs, now } = opts;
    events.subscribe((event) => {
      if (event.type === 'key-revoked' || event.type === 'key-changed') keyResolver.evict(event.id);
      else if (event.type === 'ban-lifted') limiter.forgetBan(event.id);
      else limiter.forgetBans();
    });

    let since = new Date(now() - CLOCK_SLACK_MS);
    // Each poll overlaps the last by CLOCK_SLACK_MS, so a change comes back poll after poll for
    // that long: it is evicted once (by id and updatedAt), not once per poll, which would send a
    // busy key back to the store every pollMs. (A lookup an eviction overtook is not cached: see
    // KeyResolver.evictions.)
    const evicted = new Map<string, string>();
    let timer: NodeJS.Timeout | undefined;
    let polling = false;
    const poll = async () => {
      if (polling) return;
      polling = true;
      const started = now();
      try {
        for (const { id, updatedAt } of await keyStore.changedSince(since)) {
          if (updatedAt !== undefined) {
            if (evicted.get(id) === updatedAt) continue;
            evicted.set(id, updatedAt);
          }
          keyResolver.evict(id);
        }
        since = new Date(started - CLOCK_SLACK_MS);
        for (const [id, updatedAt] of evicted) if (Date.parse(updatedAt) < since.getTime()) evicted.delete(id);
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
