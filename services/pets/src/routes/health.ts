import { ApiError } from '@animal-store/common/errors.js';
import { neverShed } from '@animal-store/common/overload.js';
import { type FastifyPluginAsyncTypebox, Type } from '@fastify/type-provider-typebox';
import type { PetStore } from '../store/pet-store.js';

export interface HealthRoutesOptions {
  store: PetStore;
}

const Ok = Type.Object({ status: Type.Literal('ok') }, { additionalProperties: false });

/** Probes, outside /v1 and outside the OpenAPI document: for the orchestrator, not for clients. */
export const healthRoutes: FastifyPluginAsyncTypebox<HealthRoutesOptions> = async (app, { store }) => {
  // Liveness only: a dead database is not a reason to restart this process.
  app.get('/healthz', { config: neverShed, schema: { hide: true, response: { 200: Ok } } }, async () => ({
    status: 'ok' as const,
  }));

  app.get('/readyz', { schema: { hide: true, response: { 200: Ok } } }, async (request) => {
    try {
      await store.ping();
    } catch (err) {
      request.log.warn({ err }, 'not ready: pet store unreachable');
      throw new ApiError(503, 'upstream_unavailable', 'The pet store is unreachable');
    }
    return { status: 'ok' as const };
  });
};
