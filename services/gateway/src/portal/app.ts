import { registerBasePlugins } from '@animal-store/common/base-plugins.js';
import { serverOptions } from '@animal-store/common/http.js';
import { strictJsonBodies } from '@animal-store/common/json-body.js';
import { loadShedding } from '@animal-store/common/overload.js';
import { createValidatorCompiler } from '@animal-store/common/validation.js';
import Fastify, { type FastifyInstance } from 'fastify';
import { storeUnavailable } from '../api/store-unavailable.js';
import type { GatewayConfig } from '../config.js';
import type { GatewayDeps } from '../deps.js';
import { limitAddresses } from './address-limits.js';
import { portalCreditRoutes } from './credit-routes.js';
import { portalInvoiceRoutes } from './invoice-routes.js';
import { portalKeyRoutes } from './key-routes.js';
import { portalLeakRoutes } from './leak-routes.js';
import { portalPages } from './pages.js';
import { sessionRoutes } from './session-cookie.js';
import { portalUsageRoutes } from './usage-routes.js';

/** A year, the portal's own host only: other hosts of the domain may still serve plain http. */
const HSTS = 'max-age=31536000';

/**
 * The customers' portal on its own listener (PORTAL_HOST/PORTAL_PORT), neither the public API's
 * nor the admin's: it faces the internet like the API, but answers browsers with cookies, pages
 * and a CSP, none of which the API's gate, CORS or per-address limit are about; and the admin
 * listener, which holds every customer's data behind one token, stays on the operators' network.
 * Its own origin (PORTAL_URL) also keeps its cookie and CSP apart from anything else served.
 */
export async function buildPortalApp(config: GatewayConfig, deps: GatewayDeps): Promise<FastifyInstance> {
  const app = Fastify(
    serverOptions({
      serviceName: 'gateway-portal',
      logLevel: config.logLevel,
      logStream: deps.logStream,
      trustProxy: config.trustProxy,
    }),
  );
  // Every answer is one customer's: no cache on the way may keep it. Over TLS (request.protocol
  // believes X-Forwarded-Proto only from a proxy TRUST_PROXY names) the browser is told to come
  // back only over https for a year (HSTS); over plain http a browser ignores it, so none is sent.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('cache-control', 'no-store');
    if (request.protocol === 'https') reply.header('strict-transport-security', HSTS);
    done();
  });
  app.setValidatorCompiler(createValidatorCompiler());
  strictJsonBodies(app);
  await registerBasePlugins(app, { classifyError: storeUnavailable });
  // Shed first, before any Redis call, then count the address: an overloaded replica refuses
  // quickly, and an address over its limit costs nothing beyond the count.
  await app.register(loadShedding, config.overload);
  app.addHook('onRequest', limitAddresses(deps.portalAddresses));
  await app.register(async (scope) => {
    await sessionRoutes(scope, { store: deps.portalSessions, now: deps.now, portalUrl: config.portalUrl });
    await scope.register(portalUsageRoutes, { deps });
    await scope.register(portalKeyRoutes, { deps });
    await scope.register(portalLeakRoutes, { deps });
    await scope.register(portalCreditRoutes, { deps });
    await scope.register(portalInvoiceRoutes, { deps });
  });
  await app.register(portalPages, { readEachRequest: !config.production });
  return app;
}
