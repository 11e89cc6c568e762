import { registerBasePlugins } from '@animal-store/common/base-plugins.js';
import { encodedBodyRefusal } from '@animal-store/common/content-encoding.js';
import { EnvReader } from '@animal-store/common/env.js';
import { MAX_HEADER_FIELDS, serverOptions } from '@animal-store/common/http.js';
import { strictJsonBodies } from '@animal-store/common/json-body.js';
import { createRegistry, httpMetrics } from '@animal-store/common/metrics.js';
import { loadShedding, readOverloadConfig } from '@animal-store/common/overload.js';
import { createValidatorCompiler } from '@animal-store/common/validation.js';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify from 'fastify';
import type { Registry } from 'prom-client';
import type { Config } from './config.js';
import { registerOpenApi } from './openapi.js';
import { healthRoutes } from './routes/health.js';
import { petRoutes } from './routes/pets.js';
import { sharedSchemas } from './schemas.js';
import { instrumentStore } from './store/instrumented-pet-store.js';
import type { PetStore } from './store/pet-store.js';

/** Without `overload`, the service sheds at the defaults (OVERLOAD_* unset). */
export type AppConfig = Pick<Config, 'logLevel'> & Partial<Pick<Config, 'overload'>>;

export interface AppDeps {
  store: PetStore;
  /** Defaults to a fresh registry, so apps built side by side in tests do not share metrics. */
  registry?: Registry;
  /** Where log lines go instead of stdout (tests capture them). */
  logStream?: { write(line: string): void };
}

/** Builds the pets service without listening; server.ts listens, tests inject. */
export function buildApp(config: AppConfig, deps: AppDeps) {
  const app = Fastify(
    serverOptions({ logLevel: config.logLevel, serviceName: 'pets', logStream: deps.logStream }),
  ).withTypeProvider<TypeBoxTypeProvider>();
  app.setValidatorCompiler(createValidatorCompiler(sharedSchemas));
  strictJsonBodies(app);
  // Bodies are never decoded: one in a Content-Encoding is refused before it is read.
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const refused = encodedBodyRefusal(request.headers);
    if (refused) done(refused);
    else done(null, payload);
  });
  for (const schema of sharedSchemas) app.addSchema(schema);

  const registry = deps.registry ?? createRegistry('pets');
  const store = instrumentStore(deps.store, registry);

  registerBasePlugins(app, {
    // The caller's key, as the gateway forwarded it; absent on requests that did not come through it.
    accessLog: { fields: (request) => ({ keyId: request.headers['x-api-key-id'] }) },
    // The gateway passes on as many of a client's fields as it accepts itself and adds its own
    // (request id, forwarding, trace, key id and plan): what it accepts must not be refused here.
    maxHeaderFields: MAX_HEADER_FIELDS + 32,
  });
  app.register(loadShedding, config.overload ?? readOverloadConfig(new EnvReader({})));
  app.register(httpMetrics, { registry });
  registerOpenApi(app);
  app.register(healthRoutes, { store });
  app.register(petRoutes, { store });
  return app;
}
