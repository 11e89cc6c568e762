import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { sendError } from '@animal-store/common/error-handler.js';
import { errorBody } from '@animal-store/common/errors.js';
import compress from '@fastify/compress';
import fastifyStatic from '@fastify/static';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance, FastifyReply, FastifyRequest, onSendHookHandler } from 'fastify';
import type { Dispatcher } from 'undici';
import { API_INDEX, API_INDEX_SCHEMA } from './api-index.js';
import type { OpenApiDocument } from './openapi.js';
import type { PublicDocumentOptions } from './openapi-description.js';
import { OpenApiSource, OpenApiUnavailable } from './openapi-source.js';

export interface DocsOptions {
  /** Base URL of the pets service, whose /v1/openapi.json the public document is made from. */
  upstream: string;
  timeoutMs: number;
  /** How to reach it: the proxy's pool (default: undici's global dispatcher). */
  dispatcher?: Dispatcher;
  /** How long the transformed document is kept (default 60 s). */
  ttlMs?: number;
  /** Servers, contact, license and ban rule of the public document (default: the config defaults). */
  document?: PublicDocumentOptions;
}

/**
 * The reference page loads only from this origin: swagger-ui's script, style and images are served
 * here, the document comes from ./json. No inline script, nothing from another host.
 */
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

/** What @fastify/swagger holds: never served, every answer is the cached public document instead. */
const PLACEHOLDER: OpenApiDocument = {
  openapi: '3.1.0',
  info: { title: 'Animal store API', version: '1.0.0' },
  paths: {},
};

const require = createRequire(import.meta.url);
const SWAGGER_UI_MAIN = require.resolve('@fastify/swagger-ui');
/** swagger-ui's files (bundle, styles, icons), as the plugin ships them. */
const SWAGGER_UI_FILES = join(dirname(SWAGGER_UI_MAIN), 'static');
/** The plugin's version names its files: a new version is a new URL, so a year's caching is safe. */
const SWAGGER_UI_VERSION = (require('@fastify/swagger-ui/package.json') as { version: string }).version;
const VERSIONED_PREFIX = `/static/${SWAGGER_UI_VERSION}/`;
/** Asset references of the page; swagger-initializer.js is made from this file's options, so it keeps its URL. */
const ASSET_REFERENCE = /\/static\/(?!swagger-initializer\.js)/g;

/** Points the page at the versioned copies of swagger-ui's files. */
const versionAssetLinks: onSendHookHandler = (request, _reply, payload, done) => {
  const url = request.routeOptions.url;
  const page = (url === '/docs' || url === '/docs/') && typeof payload === 'string';
  done(null, page ? payload.replace(ASSET_REFERENCE, VERSIONED_PREFIX) : payload);
};

function unavailable(err: unknown) {
  return err instanceof OpenApiUnavailable
    ? err.body
    : errorBody(503, 'upstream_unavailable', 'The API description is unavailable');
}

/**
 * The public API reference, open to anyone without a key: the index at GET /v1, the OpenAPI
 * document at GET /v1/openapi.json, and swagger-ui at /docs rendering the same document, served
 * from the package's own assets. Every request counts against its address's limit (a key sent
 * here is not read: reading the reference spends no key's quota and needs no key store), and
 * every answer is compressed when the client accepts it. Encapsulated: the hooks, the
 * compression and the decorators here touch only these routes, never the proxied API.
 */
export async function docsRoutes(app: FastifyInstance, opts: DocsOptions): Promise<void> {
  const source = new OpenApiSource({
    upstream: opts.upstream,
    timeoutMs: opts.timeoutMs,
    ...(opts.dispatcher !== undefined ? { dispatcher: opts.dispatcher } : {}),
    ...(opts.ttlMs !== undefined ? { ttlMs: opts.ttlMs } : {}),
    ...(opts.document !== undefined ? { document: opts.document } : {}),
    onRefreshError: (err, servingStale) =>
      app.log.warn(
        { err },
        servingStale
          ? 'cannot refresh the API description from the pets service; serving the last one'
          : 'cannot fetch the API description from the pets service',
      ),
  });

  // Every route of this plugin, swagger-ui's and its static assets' included, is keyless and
  // limited per address.
  app.addHook('onRoute', (route) => {
    route.config = { ...route.config, addressLimited: true };
  });

  // Added before compression's own onSend, so it still sees the page as text.
  app.addHook('onSend', versionAssetLinks);
  // The swagger-ui bundle is 1.5 MB as it is, about a quarter of that compressed.
  await app.register(compress, { encodings: ['br', 'gzip'], globalDecompression: false });

  // swagger-ui's files under a URL naming their version, so a browser keeps them for a year and
  // never asks again; send's weak ETag and Last-Modified answer a revalidation with 304.
  await app.register(fastifyStatic, {
    root: SWAGGER_UI_FILES,
    prefix: `/docs${VERSIONED_PREFIX}`,
    decorateReply: false,
    index: false,
    maxAge: 365 * 24 * 3600 * 1000,
    immutable: true,
  });

  // Both spellings: the document lists it as GET / under the base address, which a client joins
  // into /v1/.
  for (const url of ['/v1', '/v1/']) {
    app.get(url, { schema: { hide: true, response: { 200: API_INDEX_SCHEMA } } }, async () => API_INDEX);
  }

  // The gateway's own document, built from the pets service's (openapi.ts); never proxied.
  app.get('/v1/openapi.json', async (_request, reply) => {
    try {
      const doc = await source.get();
      // private: the answer carries this address's rate-limit headers, not for a shared cache.
      return reply.header('cache-control', 'private, max-age=60').send(doc);
    } catch (err) {
      return sendError(reply, unavailable(err));
    }
  });

  // swagger-ui needs @fastify/swagger and always loads its document from <prefix>/json. In static
  // mode @fastify/swagger holds a placeholder; the hook below fetches (or takes from the cache)
  // the public document and transformSpecification answers with it.
  const documents = new WeakMap<FastifyRequest, OpenApiDocument>();
  await app.register(swagger, { mode: 'static', specification: { document: PLACEHOLDER as never } });
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    staticCSP: CONTENT_SECURITY_POLICY,
    theme: { title: 'Animal store API reference' },
    uiConfig: {
      // No top bar: it only offers to explore other documents, and its logo needs an inline style.
      layout: 'BaseLayout',
      deepLinking: true,
      displayOperationId: true,
      docExpansion: 'list',
      defaultModelsExpandDepth: 1,
      tryItOutEnabled: false,
    },
    uiHooks: {
      preHandler: async (request: FastifyRequest, reply: FastifyReply) => {
        const url = request.routeOptions.url;
        if (url !== '/docs/json' && url !== '/docs/yaml') return;
        try {
          documents.set(request, await source.get());
        } catch (err) {
          return sendError(reply, unavailable(err));
        }
      },
    },
    transformSpecification: (placeholder, request) => documents.get(request) ?? placeholder,
    transformSpecificationClone: false,
  });
}
