import { registerBasePlugins } from '@animal-store/common/base-plugins.js';
import { type OnMalformed, serverOptions } from '@animal-store/common/http.js';
import { httpMetrics } from '@animal-store/common/metrics.js';
import { loadShedding } from '@animal-store/common/overload.js';
import { createValidatorCompiler } from '@animal-store/common/validation.js';
import Fastify, { type FastifyInstance } from 'fastify';
import type { GatewayConfig } from './config.js';
import type { GatewayDeps } from './deps.js';
import { gatewayAccessFields } from './gate/access-fields.js';
import { cors } from './gate/cors.js';
import { gate } from './gate/gate.js';
import { keylessCharge } from './gate/keyless.js';
import { setExhaustedAnonymousHeaders } from './gate/rate-limit-headers.js';
import { healthRoutes } from './observability/health-routes.js';
import { serverTiming } from './observability/server-timing.js';
import { registerProxy, upstreamPool } from './proxy/proxy.js';
import { docsRoutes } from './reference/docs-routes.js';
import { publicDocumentOptions } from './reference/openapi-description.js';
import { keySync } from './replicas/key-sync.js';
import { UsageReadLimit } from './self-service/usage-reads.js';
import { usageRoute } from './self-service/usage-route.js';
import { webhookLifecycle } from './webhooks/lifecycle.js';

/** The public gateway: health, then the gate and the proxy to the pets service. Does not listen. */
export async function buildApp(config: GatewayConfig, deps: GatewayDeps): Promise<FastifyInstance> {
  const keyless = keylessCharge(deps.anonymous, deps.metrics, deps.now);
  // Requests refused as malformed before the gate count against their address like keyless ones.
  const onMalformed: OnMalformed = (request, reply) => keyless(request, reply, 'bad_request');
  const app = Fastify(
    serverOptions({
      serviceName: 'gateway',
      logLevel: config.logLevel,
      trustProxy: config.trustProxy,
      requestTimeoutMs: config.requestTimeoutMs,
      logger: deps.logger,
      onMalformed,
    }),
  );
  app.setValidatorCompiler(createValidatorCompiler());

  await registerBasePlugins(app, { accessLog: { fields: gatewayAccessFields }, onMalformed });
  await app.register(loadShedding, {
    ...config.overload,
    onShed: (_request, reply, retryAfterSeconds) => {
      const at = deps.now();
      setExhaustedAnonymousHeaders(reply, deps.anonymous.perMinute, at, at + retryAfterSeconds * 1000);
    },
  });
  await app.register(httpMetrics, { registry: deps.registry });
  // Its first mark before the gate's hook runs.
  await app.register(serverTiming, { enabled: config.serverTiming });
  await app.register(healthRoutes, { keyStore: deps.keyStore, timeoutMs: 1_000 });
  await app.register(keySync, { ...deps, pollMs: config.revocationPollMs });
  // Before the gate: a preflight is answered without a key, and refusals carry the CORS headers.
  if (config.corsOrigins.length > 0) await app.register(cors, { origins: config.corsOrigins });
  await app.register(gate, {
    ...deps,
    keyless,
    keyLookupTimeoutMs: config.keyLookupTimeoutMs,
    banSeconds: config.ban.durationMs / 1000,
    usageReads: new UsageReadLimit(),
  });
  await app.register(usageRoute, deps);
  const pool = upstreamPool(config.petsUrl, config.upstreamTimeoutMs);
  app.addHook('onClose', async () => {
    await pool.destroy();
    // Refusals of known bans are counted in batches: write the last batch before Redis closes.
    await deps.history.flush().catch((err: unknown) => app.log.warn({ err }, 'usage history: last counts not written'));
    // As the history's last batch: the refunds still waiting, before Redis closes.
    await deps.creditRefunds.flush();
    // Then the spool, which what those could not write went to: a last try, else kept (or logged).
    await deps.usageSpool?.stop();
  });
  await app.register(docsRoutes, {
    upstream: config.petsUrl,
    timeoutMs: config.upstreamTimeoutMs,
    dispatcher: pool,
    document: publicDocumentOptions(config),
  });
  await registerProxy(app, {
    pool,
    metrics: deps.metrics,
    costs: config.plans.routeCosts,
    history: deps.history,
    refunds: deps.creditRefunds,
    billable: (plan) => config.plans.plans.get(plan)?.billable,
  });
  // What a predecessor spooled (USAGE_SPOOL_DIR) goes into the history as soon as Redis answers.
  app.addHook('onReady', async () => deps.usageSpool?.start());
  // Every replica closes hours; the store appends each revision once (metering/closer.ts).
  app.addHook('onReady', async () => deps.meteringCloser.start());
  app.addHook('onClose', async () => deps.meteringCloser.stop());
  // The public app alone exchanges the region's counts: the one listener every gateway has.
  app.addHook('onReady', async () => deps.regions?.start());
  app.addHook('onClose', async () => deps.regions?.close());
  // In the background once listening, never holding up readiness; a scan still going stops at close.
  app.addHook('onListen', async () => deps.balanceRepair?.start());
  app.addHook('onClose', async () => deps.balanceRepair?.stop());
  await app.register(webhookLifecycle, { webhooks: deps.webhooks });
  return app;
}
