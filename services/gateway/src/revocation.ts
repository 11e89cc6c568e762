import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { EventBus } from './events.js';
import type { KeyResolver } from './keys/key-resolver.js';
import type { KeyStore } from './keys/key-store.js';
import type { GuardedLimiter } from './limits/guarded-limiter.js';

export interface RevocationOptions {
  events: EventBus;
  keys: KeyResolver;
  keyStore: KeyStore;
  limiter: GuardedLimiter;
  pollMs: number;
  now: () => number;
}

/** Polls overlap by this much so a revocation stamped by a replica with a slower clock is not missed. */
const CLOCK_SLACK_MS = 30_000;

/**
 * Keeps this replica's key cache and ban knowledge in step with the others: events bring news
 * at once; the poll of the store's revocations guarantees it within `pollMs` even when an event
 * was lost (Redis down, replica reconnecting).
 */
export const revocationSync = fp(
  async (app: FastifyInstance, opts: RevocationOptions) => {
    const { events, keys, keyStore, limiter, pollMs, now } = opts;
    events.subscribe((event) => {
      if (event.type === 'key-revoked') keys.evict(event.id, event.sha256);
      else if (event.type === 'ban-lifted') limiter.forgetBan(event.id);
      else limiter.forgetBans();
    });

    let since = new Date(now() - CLOCK_SLACK_MS);
    let timer: NodeJS.Timeout | undefined;
    let polling = false;
    const poll = async () => {
      if (polling) return;
      polling = true;
      const started = now();
      try {
        for (const revoked of await keyStore.revokedSince(since)) keys.evict(revoked.id, revoked.sha256);
        since = new Date(started - CLOCK_SLACK_MS);
      } catch (err) {
        app.log.warn({ err }, 'revocation poll failed; will retry');
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
  { name: 'revocation-sync' },
);
