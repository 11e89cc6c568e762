import { errorHandling } from '@animal-store/common/error-handler.js';
import { ApiError } from '@animal-store/common/errors.js';
import { httpBasics, serverOptions } from '@animal-store/common/http.js';
import { httpMetrics } from '@animal-store/common/metrics.js';
import { createValidatorCompiler } from '@animal-store/common/validation.js';
import Fastify, { type FastifyInstance } from 'fastify';
import { gate } from './auth.js';
import type { GatewayConfig } from './config.js';
import type { GatewayDeps } from './deps.js';
import { registerProxy } from './proxy.js';
import { revocationSync } from './revocation.js';
import { docsRoutes } from './routes/docs.js';
import { healthRoutes } from './routes/health.js';

/** The public gateway: health, metrics, then the gate and the proxy to the pets service. Does not listen. */
export async function buildApp(config: GatewayConfig, deps: GatewayDeps): Promise<FastifyInstance> {
  const app = Fastify(
    serverOptions({
      serviceName: 'gateway',
      logLevel: config.logLevel,
      trustProxy: config.trustProxy,
      requestTimeoutMs: config.requestTimeoutMs,
      logStream: deps.logStream,
    }),
  );
  app.setValidatorCompiler(createValidatorCompiler());

  deps.limiter.hooks = {
    onPrimaryError: (err, first) => {
      deps.metrics.redisErrors.inc();
      if (first) {
        app.log.error(
          { err },
          config.failureMode === 'open'
            ? 'Redis rate limiter failing: serving with the per-replica in-memory fallback'
            : 'Redis rate limiter failing: refusing keyed requests with 503 (RATE_LIMIT_FAILURE_MODE=closed)',
        );
      }
    },
    onRecovered: () => app.log.warn('Redis rate limiter recovered: shared limits are back'),
  };

  await app.register(httpBasics);
  await app.register(errorHandling);
  await app.register(httpMetrics, { registry: deps.registry });
  await app.register(healthRoutes, { keyStore: deps.keyStore, timeoutMs: 1_000 });
  await app.register(revocationSync, {
    events: deps.events,
    keys: deps.keys,
    keyStore: deps.keyStore,
    limiter: deps.limiter,
    pollMs: config.revocationPollMs,
    now: deps.now,
  });
  await app.register(gate, {
    keys: deps.keys,
    limiter: deps.limiter,
    anonymous: deps.anonymous,
    metrics: deps.metrics,
    now: deps.now,
  });
  // The proxy streams bodies through unread, so fastify's bodyLimit never applies here. Refuse a
  // declared length over it before proxying: the upstream's early 413 would otherwise race the
  // body still being sent, and the client would get a 502. (Chunked bodies: the upstream's 413.)
  const bodyLimit = app.initialConfig.bodyLimit ?? 1024 * 1024;
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const declared = request.headers['content-length'];
    if (declared !== undefined && Number(declared) > bodyLimit) {
      return done(
        new ApiError(413, 'payload_too_large', 'Request body is larger than the limit', { connection: 'close' }),
      );
    }
    done(null, payload);
  });
  await app.register(docsRoutes, { upstream: config.petsUrl, timeoutMs: config.upstreamTimeoutMs });
  await registerProxy(app, { upstream: config.petsUrl, timeoutMs: config.upstreamTimeoutMs, metrics: deps.metrics });
  return app;
}
