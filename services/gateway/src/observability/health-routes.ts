import { sendError } from '@animal-store/common/error-handler.js';
import { errorBody } from '@animal-store/common/errors.js';
import { neverShed } from '@animal-store/common/overload.js';
import type { FastifyInstance } from 'fastify';

/**
 * Liveness says the process answers. Readiness says this replica can serve: the key store
 * answers. Redis is deliberately not part of it: in open mode a Redis outage is served from the
 * fallback, and taking every replica out of rotation would turn a degraded limiter into an outage.
 * So a key store in Redis (no MongoDB) is not pinged either: its outage is that same Redis's, the
 * keys cached on each replica still answer, and every replica would leave rotation at once.
 */
export async function healthRoutes(
  app: FastifyInstance,
  opts: { keyStore: { readonly kind: string; ping(): Promise<void> }; timeoutMs: number },
) {
  app.get('/healthz', { config: { public: true, ...neverShed }, schema: { hide: true } as object }, async () => ({
    status: 'ok',
  }));
  app.get('/readyz', { config: { public: true }, schema: { hide: true } as object }, async (request, reply) => {
    if (opts.keyStore.kind === 'redis') return { status: 'ready' };
    try {
      await Promise.race([
        opts.keyStore.ping(),
        new Promise((_, reject) =>
          setTimeout(() => reject(new Error('key store ping timed out')), opts.timeoutMs).unref(),
        ),
      ]);
      return { status: 'ready' };
    } catch (err) {
      request.log.warn({ err }, 'not ready');
      return sendError(reply, errorBody(503, 'upstream_unavailable', 'The key store is unreachable'));
    }
  });
}
