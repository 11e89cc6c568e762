import Fastify, { type FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import { registerBasePlugins } from './base-plugins.js';
import { type HttpOptions, serverOptions } from './http.js';

/** A registry per app, never prom-client's global one, so several apps can live in one process. */
export function createRegistry(service: string, defaults = true): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  if (defaults) collectDefaultMetrics({ register: registry });
  return registry;
}

/** Request count and latency by route template and status; served by metricsApp, on its own listener. */
export const httpMetrics = fp(
  async (app: FastifyInstance, opts: { registry: Registry }) => {
    const { registry } = opts;
    const requests = new Counter({
      name: 'http_requests_total',
      help: 'HTTP requests by route, method and status',
      labelNames: ['route', 'method', 'status'],
      registers: [registry],
    });
    const duration = new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request latency by route, method and status',
      labelNames: ['route', 'method', 'status'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
    // Label children are looked up once per route, method and status instead of hashing the
    // labels on every request; routes are a fixed set, so the map stays small.
    const children = new Map<string, { count: Counter.Internal; latency: Histogram.Internal<string> }>();
    app.addHook('onResponse', (request, reply, done) => {
      const route = request.is404 ? 'unmatched' : (request.routeOptions.url ?? 'unmatched');
      const id = `${route} ${request.method} ${reply.statusCode}`;
      let child = children.get(id);
      if (!child) {
        const labels = { route, method: request.method, status: String(reply.statusCode) };
        child = { count: requests.labels(labels), latency: duration.labels(labels) };
        children.set(id, child);
      }
      child.count.inc();
      child.latency.observe(reply.elapsedTime / 1000);
      done();
    });
  },
  { name: 'http-metrics' },
);

/**
 * GET /metrics on a listener of its own (METRICS_HOST/METRICS_PORT), never the public one: what
 * the process runs on is for the monitoring system, not for clients. Its requests are neither
 * counted in the registry nor logged per request: scrapes would drown the traffic they describe.
 */
export async function buildMetricsApp(
  registry: Registry,
  opts: Pick<HttpOptions, 'serviceName' | 'logLevel' | 'logStream'>,
): Promise<FastifyInstance> {
  const app = Fastify(serverOptions({ ...opts, serviceName: `${opts.serviceName}-metrics` }));
  await registerBasePlugins(app, { traceContext: false, accessLog: false });
  app.get('/metrics', async (_request, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });
  return app;
}
