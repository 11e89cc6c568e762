import { type ErrorBody, ErrorSchema, errorBody } from '@animal-store/common/errors.js';
import { API_INDEX_OPERATION } from './api-index.js';
import { PLAN_LIMITS } from './plans.js';

/** The parts of an OpenAPI 3.1 document the gateway touches; everything else passes through as it is. */
export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string; description?: string; [key: string]: unknown };
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

type Json = Record<string, unknown>;
interface ResponseObject {
  description: string;
  headers?: Record<string, unknown>;
  content?: Record<string, unknown>;
  [key: string]: unknown;
}

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/** Header components the gateway adds; every response of every operation refers to the rate-limit ones. */
export const RATE_LIMIT_HEADER_NAMES = [
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'RateLimit',
  'RateLimit-Policy',
] as const;

const HEADER_COMPONENTS: Record<string, Json> = {
  'X-RateLimit-Limit': {
    description: 'Requests allowed in the binding window (the window with the fewest requests remaining).',
    schema: { type: 'integer', minimum: 0 },
  },
  'X-RateLimit-Remaining': {
    description: 'Requests remaining in the binding window; never negative.',
    schema: { type: 'integer', minimum: 0 },
  },
  'X-RateLimit-Reset': {
    description: 'When the binding window resets, in Unix seconds.',
    schema: { type: 'integer', minimum: 0 },
  },
  RateLimit: {
    description:
      'IETF draft field: the state of every window, e.g. `"minute";r=12;t=41, "day";r=950;t=80000` ' +
      '(r: requests remaining, t: seconds until the reset).',
    schema: { type: 'string' },
  },
  'RateLimit-Policy': {
    description:
      'IETF draft field: the policy of every window, e.g. `"minute";q=60;w=60, "day";q=1000;w=86400` ' +
      '(q: requests allowed, w: window in seconds).',
    schema: { type: 'string' },
  },
  'Retry-After': {
    description: 'Whole seconds to wait before retrying.',
    schema: { type: 'integer', minimum: 0 },
  },
};

const headerRef = (name: string) => ({ $ref: `#/components/headers/${name}` });
const errorContent = () => ({ 'application/json': { schema: { $ref: '#/components/schemas/Error' } } });

/** Responses only the gateway gives, whatever the operation. */
function gatewayResponses(): Record<string, ResponseObject> {
  return {
    '401': {
      description:
        'The API key is missing (`missing_api_key`), invalid (`invalid_api_key`), or past its expiry or, after a ' +
        'rotation, its grace period (`expired_api_key`; the message says when). The rate-limit headers ' +
        'describe the per-address limit for requests without a valid key.',
      headers: {
        'WWW-Authenticate': {
          description:
            'RFC 6750 challenge: `Bearer realm="animal-store"`, with `error="invalid_token"` and an ' +
            '`error_description` when a key was sent but is not valid or has expired.',
          required: true,
          schema: { type: 'string' },
        },
      },
      content: errorContent(),
    },
    '429': {
      description:
        'Rate limit exceeded (`rate_limit_exceeded`), or the key is temporarily banned for ignoring rate limits ' +
        '(`api_key_banned`). Wait `Retry-After` seconds, then back off exponentially.',
      headers: { 'Retry-After': { ...headerRef('Retry-After'), required: true } },
      content: errorContent(),
    },
    '502': {
      description: 'The pets service closed the connection or sent no usable answer (`upstream_unavailable`).',
      content: errorContent(),
    },
    '503': {
      description:
        'Temporarily unavailable: rate limiting is down and the gateway refuses rather than serve unlimited ' +
        '(`rate_limiter_unavailable`), or the pets service, its database or the API key store is ' +
        'unreachable, or the gateway is shutting down (`upstream_unavailable`). Retry later; ' +
        '`Retry-After`, when present, says how long to wait.',
      headers: { 'Retry-After': headerRef('Retry-After') },
      content: errorContent(),
    },
    '504': {
      description: 'The pets service did not answer in time (`upstream_timeout`).',
      content: errorContent(),
    },
  };
}

/**
 * The Error shape, for an upstream document that does not define it (the pets service does):
 * the one ErrorSchema, as plain JSON Schema (no $id, no TypeBox symbols).
 */
const { $id: _id, ...ERROR_SCHEMA } = JSON.parse(JSON.stringify(ErrorSchema)) as typeof ErrorSchema;

function describeApi(): string {
  const n = (value: number) => value.toLocaleString('en-US');
  const rows = Object.entries(PLAN_LIMITS).map(
    ([plan, limits]) => `| ${plan[0]?.toUpperCase()}${plan.slice(1)} | ${n(limits.perMinute)} | ${n(limits.perDay)} |`,
  );
  return [
    'List, add and read the animals of the store, through the API gateway.',
    '',
    'Every operation needs an API key sent as a bearer token: `Authorization: Bearer <API_KEY>`.',
    '',
    '## Plans and rate limits',
    '',
    '| Plan | Requests per minute | Requests per day |',
    '| --- | --- | --- |',
    ...rows,
    '| Enterprise | agreed per key | agreed per key |',
    '',
    "Each key has a minute and a day window; a window starts with the key's first admitted request, and " +
      'only admitted requests count. Every response carries `X-RateLimit-Limit`, `X-RateLimit-Remaining` ' +
      'and `X-RateLimit-Reset` for the binding window (the one with the fewest requests remaining), and the ' +
      'IETF draft fields `RateLimit` and `RateLimit-Policy` for every window. Above a limit the answer is ' +
      '429 with `Retry-After`: wait that long and back off exponentially. A key that keeps sending requests ' +
      'after 429s is banned for a while (429 `api_key_banned`). Requests without a valid key are limited per ' +
      'client address, and so are `GET /v1`, this document and the reference at `/docs`, with or without a key.',
    '',
    'Every error body is `{ "code", "message", "status" }` (the `Error` schema).',
  ].join('\n');
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

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

/**
 * Turns the pets service's document into the public one: served from this gateway, the bearer
 * scheme on every operation, the responses only the gateway gives (401, 429, 502, 503, 504), and
 * the rate-limit headers on every response. Schemas pass through untouched. Pure: the input is
 * not modified.
 */
export function publicDocument(upstream: OpenApiDocument): OpenApiDocument {
  const doc = structuredClone(upstream);
  doc.info = {
    ...doc.info,
    title: 'Animal store API',
    description: describeApi(),
  };
  // Relative: the document describes whichever gateway served it, whatever its public host.
  doc.servers = [{ url: '/', description: 'The gateway that served this document' }];

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

  for (const pathItem of Object.values(doc.paths ?? {})) {
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
      withRateLimitHeaders(responses);
      operation.responses = Object.fromEntries(
        Object.entries(responses).sort(([a], [b]) => a.localeCompare(b, 'en', { numeric: true })),
      );
    }
  }
  // Added after the loop: the gateway answers it itself, keyless, so only the limit headers apply.
  const index = structuredClone(API_INDEX_OPERATION) as { responses: Record<string, ResponseObject> };
  withRateLimitHeaders(index.responses);
  doc.paths = { '/v1': { get: index }, ...doc.paths };
  return doc;
}

/** Why the document cannot be served, as the Error body to send. */
export class OpenApiUnavailable extends Error {
  constructor(readonly body: ErrorBody) {
    super(body.message);
    this.name = 'OpenApiUnavailable';
  }
}

export interface OpenApiSourceOptions {
  /** Base URL of the pets service. */
  upstream: string;
  timeoutMs: number;
  /** How long a transformed document is served before the upstream is asked again. */
  ttlMs?: number;
  now?: () => number;
  onRefreshError?: (err: unknown, servingStale: boolean) => void;
}

function failureBody(err: unknown): ErrorBody {
  if (err instanceof OpenApiUnavailable) return err.body;
  const name = (err as { name?: string }).name;
  if (name === 'TimeoutError' || name === 'AbortError') {
    return errorBody(504, 'upstream_timeout', 'The pets service did not send its API description in time');
  }
  return errorBody(503, 'upstream_unavailable', 'The API description is unavailable: the pets service is unreachable');
}

/**
 * The public document, fetched from the pets service and transformed, kept for `ttlMs`. Concurrent
 * callers share one fetch; when a refresh fails the last good document is served (stale beats
 * none); with nothing cached the failure is an OpenApiUnavailable carrying the Error body.
 */
export class OpenApiSource {
  private cached: { doc: OpenApiDocument; at: number } | null = null;
  private inflight: Promise<OpenApiDocument> | null = null;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(private readonly opts: OpenApiSourceOptions) {
    this.ttlMs = opts.ttlMs ?? 60_000;
    this.now = opts.now ?? Date.now;
  }

  async get(): Promise<OpenApiDocument> {
    const cached = this.cached;
    if (cached && this.now() - cached.at < this.ttlMs) return cached.doc;
    this.inflight ??= this.refresh().finally(() => {
      this.inflight = null;
    });
    return this.inflight;
  }

  private async refresh(): Promise<OpenApiDocument> {
    try {
      const doc = publicDocument(await this.fetchUpstream());
      this.cached = { doc, at: this.now() };
      return doc;
    } catch (err) {
      this.opts.onRefreshError?.(err, this.cached !== null);
      if (this.cached) return this.cached.doc;
      throw err instanceof OpenApiUnavailable ? err : new OpenApiUnavailable(failureBody(err));
    }
  }

  private async fetchUpstream(): Promise<OpenApiDocument> {
    const url = `${this.opts.upstream.replace(/\/+$/, '')}/v1/openapi.json`;
    const signal = AbortSignal.timeout(this.opts.timeoutMs);
    const res = await fetch(url, { headers: { accept: 'application/json' }, signal });
    if (!res.ok) {
      await res.body?.cancel();
      throw new OpenApiUnavailable(
        errorBody(502, 'upstream_unavailable', `The pets service answered ${res.status} for its API description`),
      );
    }
    let body: unknown;
    try {
      body = await res.json();
    } catch (err) {
      if ((err as { name?: string }).name === 'TimeoutError') throw err;
      body = undefined;
    }
    if (!isOpenApi31(body)) {
      throw new OpenApiUnavailable(
        errorBody(502, 'upstream_unavailable', 'The pets service sent no usable API description'),
      );
    }
    return body;
  }
}
