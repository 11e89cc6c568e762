import { errorHandling } from '@animal-store/common/error-handler.js';
import { httpBasics, serverOptions } from '@animal-store/common/http.js';
import { createRegistry, httpMetrics } from '@animal-store/common/metrics.js';
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

export type AppConfig = Pick<Config, 'logLevel'>;

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
  app.setValidatorCompiler(createValidatorCompiler());
  // Bodies are JSON only; fastify would otherwise also accept text/plain.
  app.removeContentTypeParser('text/plain');
  for (const schema of sharedSchemas) app.addSchema(schema);

  const registry = deps.registry ?? createRegistry('pets');
  const store = instrumentStore(deps.store, registry);

  app.register(httpBasics);
  app.register(errorHandling);
  app.register(httpMetrics, { registry });
  registerOpenApi(app);
  app.register(healthRoutes, { store });
  app.register(petRoutes, { store });
  return app;
}
