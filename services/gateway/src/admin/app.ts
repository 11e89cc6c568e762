import { registerBasePlugins } from '@animal-store/common/base-plugins.js';
import { ApiError, clipped } from '@animal-store/common/errors.js';
import { serverOptions } from '@animal-store/common/http.js';
import { strictJsonBodies } from '@animal-store/common/json-body.js';
import { createValidatorCompiler } from '@animal-store/common/validation.js';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { storeUnavailable } from '../api/store-unavailable.js';
import type { GatewayConfig } from '../config.js';
import type { GatewayDeps } from '../deps.js';
import { adminAuth } from './auth-limit.js';
import { consoleRoutes } from './console.js';
import { Idempotency } from './idempotency.js';
import { registerAdminReference } from './reference.js';
import { adminRoutes } from './routes/index.js';
import { leakRoutes } from './routes/leaks.js';
import { meteringRoutes } from './routes/metering-events.js';
import { portalSessionRoutes } from './routes/portal-sessions.js';

/**
 * Answers here carry plaintext keys (create, rotate) and key records: no cache on the way may keep
 * any of them, errors included.
 */
function noStore(reply: FastifyReply): void {
  reply.header('cache-control', 'no-store');
}

/** A route without a body schema takes no fields: a body other than none, null or `{}` is refused. */
async function refuseUnexpectedBody(request: FastifyRequest): Promise<void> {
  const body = request.body;
  if (body === undefined || body === null || request.is404 || request.routeOptions.schema?.body !== undefined) return;
  if (typeof body === 'object' && !Array.isArray(body)) {
    const [field] = Object.keys(body);
    if (field === undefined) return;
    throw new ApiError(
      400,
      'invalid_request',
      `body.${clipped(field)} is not a known field (this operation takes no body)`,
    );
  }
  throw new ApiError(400, 'invalid_request', 'body: this operation takes no body');
}

/**
 * The operators' API on its own listener (ADMIN_HOST/ADMIN_PORT), never the public one: the
 * server and its token check; the routes are in routes/, one file per resource.
 */
export async function buildAdminApp(config: GatewayConfig, deps: GatewayDeps): Promise<FastifyInstance> {
  const token = config.adminToken;
  if (!token) throw new Error('the admin API needs ADMIN_TOKEN');
  const app = Fastify(
    serverOptions({
      serviceName: 'gateway-admin',
      logLevel: config.logLevel,
      logStream: deps.logStream,
      // The router's own 400s (a URL that does not decode) run no hook.
      onMalformed: async (_request, reply) => {
        noStore(reply);
        return null;
      },
    }),
  );
  // First, so that the refusals of every later hook carry it too.
  app.addHook('onRequest', (_request, reply, done) => {
    noStore(reply);
    done();
  });
  // A field a route does not define is refused, never dropped: an operator's typo (`expiresAT`)
  // must not look applied. So is a key given twice, which JSON.parse would settle silently.
  app.setValidatorCompiler(createValidatorCompiler([], { refuseUnknownFields: true }));
  // Bodies are JSON only (415 otherwise), UTF-8 and not absurdly nested.
  strictJsonBodies(app, { refuseDuplicateKeys: true });
  app.addHook('preValidation', refuseUnexpectedBody);
  // A route that meets a store it cannot reach answers 503 with Retry-After (store-unavailable.ts).
  await registerBasePlugins(app, { classifyError: storeUnavailable });

  const auth = adminAuth(token, deps.adminAuthFailures, deps.now);
  app.addHook('onRequest', async function (request, reply) {
    if (request.routeOptions.config.unauthenticated) return;
    return auth.call(this, request, reply);
  });

  // Before the routes: the document is built from those registered after it.
  await registerAdminReference(app);
  const idempotency = new Idempotency(deps.idempotency, token);
  await app.register(adminRoutes, { deps, idempotency });
  await app.register(meteringRoutes, { deps, idempotency, stripeEventName: config.metering.stripeEventName });
  await app.register(portalSessionRoutes, { deps, idempotency, portalUrl: config.portalUrl });
  await app.register(leakRoutes, { deps, idempotency, leaks: config.leaks });
  // In development the console's files are read on every request: an edit shows on reload.
  await app.register(consoleRoutes, { readEachRequest: !config.production });
  return app;
}
