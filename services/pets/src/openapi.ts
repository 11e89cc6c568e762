import swagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { PARAMETER_DOCS } from './schemas.js';

type Parameter = { name?: unknown; description?: string; schema?: Record<string, unknown> };

/** Adds PARAMETER_DOCS to the parameters of every operation, in place. */
function documentParameters(paths: Record<string, Record<string, { parameters?: Parameter[] }> | undefined>): void {
  for (const item of Object.values(paths)) {
    for (const operation of Object.values(item ?? {})) {
      for (const parameter of operation.parameters ?? []) {
        const docs = typeof parameter.name === 'string' ? PARAMETER_DOCS[parameter.name] : undefined;
        if (docs?.description) parameter.description = docs.description;
        if (docs?.schema && parameter.schema) Object.assign(parameter.schema, docs.schema);
      }
    }
  }
}

/**
 * Builds the OpenAPI 3.1 document from the route schemas and serves it at GET /v1/openapi.json.
 * Call before the routes are registered: the document only sees routes added after it.
 */
export function registerOpenApi(app: FastifyInstance): void {
  app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Animal store: pets',
        version: '1.0.0',
        description: 'List, add and read the animals of the store. Every operation needs an API key (bearer).',
      },
      // As the spec has it: the base address ends in /v1 and paths are relative to it (the routes'
      // /v1 prefix is stripped from the paths).
      servers: [{ url: '/v1' }],
      tags: [{ name: 'pets', description: 'The animals of the store' }],
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'API key; the gateway checks it.' },
        },
      },
      security: [{ bearerAuth: [] }],
    },
    // Shared schemas become components named by their $id (Error, Pet, Pets), not def-0, def-1.
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
    transformObject: (documentObject) => {
      if (!('openapiObject' in documentObject)) return documentObject.swaggerObject;
      const doc = structuredClone(documentObject.openapiObject);
      documentParameters((doc.paths ?? {}) as Parameters<typeof documentParameters>[0]);
      return doc;
    },
  });
  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
