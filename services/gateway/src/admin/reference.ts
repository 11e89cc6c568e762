import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ErrorSchema } from '@animal-store/common/error-schema.js';
import fastifyStatic from '@fastify/static';
import swagger from '@fastify/swagger';
import type { FastifyInstance, FastifySchema } from 'fastify';
import { ADMIN_TAGS, operationOf } from './reference-operations.js';

/*
 * The admin API's reference: an OpenAPI 3.1 document built by @fastify/swagger from the routes'
 * own TypeBox schemas (the mechanism the pets service's public document is made by), served at
 * GET /admin/openapi.json behind the admin token, and a page rendering it with swagger-ui at
 * /admin/docs. The page itself holds no data and is served without the token, as the console is:
 * a browser cannot send a bearer header on a navigation, so the page asks for the token and
 * fetches the document with it.
 */

const ADMIN_DOCUMENT_PATH = '/admin/openapi.json';
const ADMIN_DOCS_PATH = '/admin/docs';

/** swagger-ui's files, as @fastify/swagger-ui ships them (the public /docs serves the same). */
const SWAGGER_UI_FILES = join(dirname(createRequire(import.meta.url).resolve('@fastify/swagger-ui')), 'static');
const ASSETS = `${ADMIN_DOCS_PATH}/static/`;

/** The page loads only from this origin: swagger-ui's files, its own script, the console's style. */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** What every admin answer other than the route's own may be, beside the 401 each route declares. */
const REFUSALS = {
  /** adminAuth: too many wrong tokens from one address. */
  429: 'Too many failed admin authentications from this address (`admin_rate_limited`); `Retry-After` says when to try again',
};
/** strictJsonBodies: a body that is not JSON, or not UTF-8. */
const UNSUPPORTED_BODY = 'The body is not JSON (`unsupported_media_type`): send `Content-Type: application/json`';

const STATUS_TEXT: Record<string, string> = {
  200: 'OK',
  201: 'Created',
  204: 'Done; no body',
  400: 'The request is not valid (`invalid_request`); the message names the field',
  401: 'No admin token, or not the right one (`unauthorized`)',
  404: 'Nothing with this id (`not_found`)',
  409: 'Refused as things stand (`conflict`); the message says why and what to do',
  422: 'This `Idempotency-Key` was used with another path or body (`idempotency_key_reused`)',
  503: 'A store the route needs cannot be reached (`store_unavailable` or `rate_limiter_unavailable`); retry after `Retry-After`',
};

/** A route's schema as the document shows it: its words, its tag, and the answers no route declares itself. */
function documented(method: string, url: string, schema: FastifySchema): FastifySchema {
  const operation = operationOf(method, url);
  const response: Record<string, unknown> = { ...(schema.response as Record<string, unknown>) };
  for (const [status, description] of Object.entries(REFUSALS)) response[status] = { ...ErrorSchema, description };
  if (schema.body !== undefined) response[415] = { ...ErrorSchema, description: UNSUPPORTED_BODY };
  for (const [status, value] of Object.entries(response)) {
    if (STATUS_TEXT[status] !== undefined && (value as { description?: string }).description === undefined) {
      response[status] = { ...(value as object), description: STATUS_TEXT[status] };
    }
  }
  // A create under an Idempotency-Key (its 422 says it takes one: shared.ts idempotentErrors).
  const idempotent = response[422] !== undefined;
  return {
    ...schema,
    ...(operation ?? {}),
    response,
    ...(idempotent
      ? {
          headers: {
            type: 'object',
            properties: {
              'idempotency-key': {
                type: 'string',
                minLength: 1,
                maxLength: 255,
                description:
                  'Makes the create safe to repeat for 24 h: the same key, path and body answer the first answer again ' +
                  '(`Idempotent-Replayed: true`) and create nothing more (docs/admin-api.md).',
              },
            },
          },
        }
      : {}),
  };
}

type Json = Record<string, unknown>;
const isJson = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Whether an operation answers CSV too (`format=csv`, or `Accept: text/csv`): the histories, the invoice preview. */
function answersCsv(operation: Json): boolean {
  const parameters = Array.isArray(operation.parameters) ? (operation.parameters as Json[]) : [];
  const format = parameters.find((p) => p.in === 'query' && p.name === 'format');
  return JSON.stringify(format?.schema ?? null).includes('"csv"');
}

/**
 * Every answer in the Error shape points at one `Error` component, as the public document's do,
 * so a generated client has one error type; the status's own words stay on the response. A route
 * that answers CSV has it beside its JSON.
 */
function finished(doc: Json): Json {
  const errorShape = JSON.stringify(Object.keys(ErrorSchema.properties).sort());
  for (const item of Object.values((doc.paths ?? {}) as Record<string, Json>)) {
    for (const operation of Object.values(item)) {
      if (!isJson(operation) || !isJson(operation.responses)) continue;
      const ok = operation.responses['200'];
      if (answersCsv(operation) && isJson(ok) && isJson(ok.content)) {
        ok.content['text/csv'] = {
          schema: { type: 'string', description: 'The same figures as CSV, a file to download' },
        };
      }
      for (const response of Object.values(operation.responses)) {
        const content = isJson(response) && isJson(response.content) ? response.content : undefined;
        for (const media of Object.values(content ?? {})) {
          const schema = isJson(media) && isJson(media.schema) ? media.schema : undefined;
          const keys = isJson(schema?.properties) ? JSON.stringify(Object.keys(schema.properties).sort()) : '';
          if (schema && keys === errorShape) (media as Json).schema = { $ref: '#/components/schemas/Error' };
        }
      }
    }
  }
  const components = (doc.components ?? {}) as Json;
  const { description: _, ...error } = ErrorSchema as unknown as Json;
  return { ...doc, components: { ...components, schemas: { Error: error, ...(components.schemas as Json) } } };
}

const DESCRIPTION = [
  'The operators’ API of the animal store gateway, on its own listener (`ADMIN_HOST`/`ADMIN_PORT`): keys, plans,',
  'customers, credits, usage, invoice previews, the metering export, portal links and webhooks.',
  '',
  'Every operation needs the admin token as a bearer token: `Authorization: Bearer <ADMIN_TOKEN>`, this document',
  'included. Errors are in one shape (`Error`); a route whose store cannot be reached answers 503 with',
  '`Retry-After`, never 500. The creates that list an `Idempotency-Key` header are safe to repeat under one.',
].join('\n');

/**
 * Registers the document's builder on the admin app and serves the document and its page. Call
 * on the admin app itself, before the routes: @fastify/swagger sees only routes added after it,
 * in this context and those below it.
 */
export async function registerAdminReference(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Animal store admin API',
        version: '1.0.0',
        description: DESCRIPTION,
        license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
        contact: { name: 'Animal store API support' },
      },
      servers: [{ url: '/', description: 'The admin listener that served this document' }],
      components: {
        securitySchemes: {
          adminToken: {
            type: 'http',
            scheme: 'bearer',
            description: 'The admin token (ADMIN_TOKEN), sent as `Authorization: Bearer <ADMIN_TOKEN>`.',
          },
        },
      },
      security: [{ adminToken: [] }],
      tags: ADMIN_TAGS.map((tag) => ({ ...tag })),
    },
    transform: ({ schema, url, route }) => {
      // The console's files and this reference are pages and assets, not operations.
      const hide = route.config?.unauthenticated === true || url === ADMIN_DOCUMENT_PATH;
      const method = Array.isArray(route.method) ? String(route.method[0]) : String(route.method);
      return { schema: hide ? { ...schema, hide: true } : documented(method, url, schema ?? {}), url };
    },
    transformObject: (documentObject) => {
      if (!('openapiObject' in documentObject)) return documentObject.swaggerObject;
      return finished(structuredClone(documentObject.openapiObject) as Json) as typeof documentObject.openapiObject;
    },
  });

  app.get(ADMIN_DOCUMENT_PATH, async (_request, reply) =>
    reply.type('application/json; charset=utf-8').send(app.swagger()),
  );

  const page = readFileSync(fileURLToPath(new URL('../../console/reference.html', import.meta.url)), 'utf8').replaceAll(
    '{{assets}}',
    ASSETS,
  );
  const script = readFileSync(fileURLToPath(new URL('../../console/reference.js', import.meta.url)));
  const secure = { 'content-security-policy': CONTENT_SECURITY_POLICY, 'x-content-type-options': 'nosniff' };
  const open = { config: { unauthenticated: true } };
  for (const url of [ADMIN_DOCS_PATH, `${ADMIN_DOCS_PATH}/`]) {
    app.get(url, open, async (_request, reply) =>
      reply
        .headers({ ...secure, 'referrer-policy': 'no-referrer', 'x-frame-options': 'DENY' })
        .type('text/html; charset=utf-8')
        .send(page),
    );
  }
  app.get(`${ADMIN_DOCS_PATH}/reference.js`, open, async (_request, reply) =>
    reply.headers(secure).type('text/javascript; charset=utf-8').send(script),
  );
  // swagger-ui's script and style; like every admin answer, not cached (cache-control: no-store).
  await app.register(async (assets) => {
    assets.addHook('onRoute', (route) => {
      route.config = { ...route.config, unauthenticated: true };
    });
    await assets.register(fastifyStatic, {
      root: SWAGGER_UI_FILES,
      prefix: ASSETS,
      decorateReply: false,
      index: false,
      allowedPath: (path) => ['/swagger-ui-bundle.js', '/swagger-ui.css'].includes(path),
    });
  });
}
