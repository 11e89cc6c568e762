import swagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';

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
      servers: [{ url: '/' }],
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
  });
  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
