import { RATE_LIMIT_HEADER_NAMES } from '../gate/rate-limit-headers.js';
import { API_INDEX_OPERATION } from './api-index.js';
import { DEFAULT_DOCUMENT_OPTIONS, describeApi, OWN_BASE, type PublicDocumentOptions } from './openapi-description.js';
import {
  ERROR_SCHEMA,
  gatewayResponses,
  HEADER_COMPONENTS,
  headerRef,
  isObject,
  type ResponseObject,
  withErrorExamples,
} from './openapi-responses.js';
import { USAGE_PATH, USAGE_SCHEMA, usageOperation } from './usage-operation.js';

/** The parts of an OpenAPI 3.1 document the gateway touches; everything else passes through as it is. */
export interface OpenApiDocument {
  openapi: string;
  info: {
    title: string;
    version: string;
    description?: string;
    contact?: { name?: string; email?: string; url?: string };
    license?: { name: string; url?: string; identifier?: string };
    [key: string]: unknown;
  };
  servers?: { url: string; description?: string }[];
  paths?: Record<string, Record<string, unknown>>;
  components?: {
    schemas?: Record<string, unknown>;
    responses?: Record<string, unknown>;
    headers?: Record<string, unknown>;
    securitySchemes?: Record<string, unknown>;
    [key: string]: unknown;
  };
  security?: Record<string, string[]>[];
  [key: string]: unknown;
}

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/** Whether an upstream answer looks enough like an OpenAPI 3.1 document to publish. */
export function isOpenApi31(value: unknown): value is OpenApiDocument {
  return (
    isObject(value) &&
    typeof value.openapi === 'string' &&
    value.openapi.startsWith('3.1.') &&
    isObject(value.info) &&
    isObject(value.paths)
  );
}

/** Puts a reference to every rate-limit header on each response (its own headers stay). */
function withRateLimitHeaders(responses: Record<string, ResponseObject>): void {
  for (const response of Object.values(responses)) {
    const headers: Record<string, unknown> = { ...response.headers };
    for (const name of RATE_LIMIT_HEADER_NAMES) headers[name] = headerRef(name);
    response.headers = headers;
  }
}

/** A response object with its `$ref` (to components.responses) resolved, as a copy this operation owns. */
function ownResponse(doc: OpenApiDocument, response: unknown): ResponseObject {
  let resolved = response;
  const ref = isObject(response) ? response.$ref : undefined;
  if (typeof ref === 'string' && ref.startsWith('#/components/responses/')) {
    resolved = doc.components?.responses?.[ref.slice('#/components/responses/'.length)];
  }
  return isObject(resolved) ? ({ ...resolved } as ResponseObject) : { description: 'Response' };
}

/** A path of the pets service relative to the base address, which ends in /v1. */
function relativePath(path: string): string {
  // A pets service that still documents full paths (servers "/") gets them moved under /v1 here.
  return path.startsWith(`${OWN_BASE}/`) ? path.slice(OWN_BASE.length) : path;
}

/**
 * Turns the pets service's document into the public one: served from the configured deployments
 * (paths relative to their /v1), the bearer scheme on every operation, the responses only the
 * gateway gives (401, 429, 502, 503, 504, default), the codes of every error response as examples,
 * and the rate-limit headers on every response. Schemas pass through untouched. Pure: the input
 * is not modified.
 */
export function publicDocument(
  upstream: OpenApiDocument,
  options: PublicDocumentOptions = DEFAULT_DOCUMENT_OPTIONS,
): OpenApiDocument {
  const doc = structuredClone(upstream);
  doc.info = {
    ...doc.info,
    title: 'Animal store API',
    description: describeApi(options),
    contact: { ...options.contact },
    license: { ...options.license },
  };
  doc.servers = options.servers.map((server) => ({ ...server }));

  const components = { ...doc.components };
  doc.components = components;
  components.schemas = { Error: ERROR_SCHEMA, ...components.schemas };
  components.headers = { ...components.headers, ...HEADER_COMPONENTS };
  components.securitySchemes = {
    ...components.securitySchemes,
    bearerAuth: {
      type: 'http',
      scheme: 'bearer',
      description: 'Your API key, sent as `Authorization: Bearer <API_KEY>`.',
    },
  };
  doc.security = [{ bearerAuth: [] }];

  const paths: Record<string, Record<string, unknown>> = {};
  for (const [path, pathItem] of Object.entries(doc.paths ?? {})) {
    // The gateway answers /v1/usage itself, whatever an upstream (or this function, before) says of it.
    if (relativePath(path) !== USAGE_PATH) paths[relativePath(path)] = pathItem;
  }
  for (const pathItem of Object.values(paths)) {
    for (const method of HTTP_METHODS) {
      const operation = pathItem[method];
      if (!isObject(operation)) continue;
      // `security: []` marks a keyless operation: neither the refusals nor the limit headers apply.
      if (Array.isArray(operation.security) && operation.security.length === 0) continue;
      const responses: Record<string, ResponseObject> = {};
      for (const [status, response] of Object.entries(isObject(operation.responses) ? operation.responses : {})) {
        responses[status] = ownResponse(doc, response);
      }
      for (const [status, response] of Object.entries(gatewayResponses())) {
        // The gateway answers these itself: its description wins, headers the upstream documents stay.
        const existing = responses[status];
        responses[status] = existing
          ? { ...existing, ...response, headers: { ...existing.headers, ...response.headers } }
          : response;
      }
      for (const [status, response] of Object.entries(responses)) {
        const headers: Record<string, unknown> = { ...response.headers };
        for (const name of RATE_LIMIT_HEADER_NAMES) headers[name] = headerRef(name);
        responses[status] = withErrorExamples(status, { ...response, headers });
      }
      // Numeric order, `default` last.
      operation.responses = Object.fromEntries(
        Object.entries(responses).sort(([a], [b]) => a.localeCompare(b, 'en', { numeric: true })),
      );
    }
  }
  // Added after the loop: the gateway answers it itself, keyless, so only the limit headers apply.
  // GET / relative to the base address: the gateway answers both /v1 and /v1/.
  const index = structuredClone(API_INDEX_OPERATION) as { responses: Record<string, ResponseObject> };
  withRateLimitHeaders(index.responses);
  components.schemas.Usage = USAGE_SCHEMA;
  const tags = (Array.isArray(doc.tags) ? doc.tags : []).filter((tag) => tag?.name !== 'usage');
  doc.tags = [...tags, { name: 'usage', description: 'What your key and your account used, and what is left' }];
  doc.paths = { '/': { get: index }, [USAGE_PATH]: { get: usageOperation() }, ...paths };
  return doc;
}
