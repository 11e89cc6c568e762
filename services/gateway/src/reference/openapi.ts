import { type ErrorBody, type ErrorCode, ErrorSchema, errorBody } from '@animal-store/common/errors.js';
import { type Dispatcher, request } from 'undici';
import type { ApiDocumentConfig } from '../config.js';
import { RATE_LIMIT_HEADER_NAMES } from '../gate/rate-limit-headers.js';
import type { BanPolicy } from '../limits/key-limiter.js';
import { DEFAULT_PLANS, LIMIT_FIELDS, type PlanBook, WINDOW_NAMES } from '../plans/plans.js';
import { UPSTREAM_FAILURES, upstreamFailure } from '../proxy/upstream-failure.js';
import { API_INDEX_OPERATION } from './api-index.js';

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

type Json = Record<string, unknown>;
interface ResponseObject {
  description: string;
  headers?: Record<string, unknown>;
  content?: Record<string, unknown>;
  [key: string]: unknown;
}

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/** Header components the gateway adds; every response of every operation refers to the rate-limit ones. */
const HEADER_COMPONENTS: Record<(typeof RATE_LIMIT_HEADER_NAMES)[number] | 'Retry-After', Json> = {
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
  // Required: every 429 carries it. A $ref cannot carry `required` beside it, so the component does.
  'Retry-After': {
    description: 'Whole seconds to wait before retrying.',
    required: true,
    schema: { type: 'integer', minimum: 0, examples: [41] },
  },
};

const headerRef = (name: string) => ({ $ref: `#/components/headers/${name}` });
const ERROR_REF = '#/components/schemas/Error';
const errorContent = () => ({ 'application/json': { schema: { $ref: ERROR_REF } } });

const example = ({ code, message }: { code: ErrorCode; message: string }): [ErrorCode, string] => [code, message];

/**
 * The codes each error status can carry, with a message as the API sends it: every Error response
 * of the document lists them as named examples, so a client knows what to switch on.
 */
const ERROR_EXAMPLES: Record<string, [ErrorCode, string][]> = {
  '400': [['invalid_request', 'body.name is required']],
  '401': [
    ['missing_api_key', 'Send your API key as "Authorization: Bearer <API_KEY>"'],
    ['invalid_api_key', 'The API key is not valid'],
    ['expired_api_key', 'This API key expired at 2030-01-31T00:00:00.000Z'],
  ],
  '403': [
    ['insufficient_scope', 'This API key may not do this: it needs the pets:write scope'],
    ['ip_not_allowed', 'This API key may not be used from 198.51.100.7'],
  ],
  '404': [['not_found', 'No pet with that id']],
  '413': [['payload_too_large', 'Request body is larger than the limit']],
  '415': [['unsupported_media_type', 'Content-Type must be application/json']],
  '429': [
    [
      'rate_limit_exceeded',
      'Rate limit exceeded for the free plan: the day quota (1000 per UTC day) is used up; it resets on 2026-11-27T00:00:00.000Z',
    ],
    ['api_key_banned', 'This API key is temporarily banned for ignoring rate limits'],
  ],
  '502': [example(UPSTREAM_FAILURES.reset)],
  '503': [
    ['rate_limiter_unavailable', 'Rate limiting is unavailable; retry shortly'],
    example(UPSTREAM_FAILURES.refused),
    ['overloaded', 'The service is overloaded; retry in 5 s'],
  ],
  '504': [example(UPSTREAM_FAILURES.timeout)],
  default: [
    ['method_not_allowed', 'DELETE is not allowed here; use GET, POST'],
    ['request_timeout', 'The request was not received in time'],
    ['internal_error', 'Internal server error'],
  ],
};

function errorExamples(status: string): Record<string, { summary: string; value: ErrorBody }> | undefined {
  const codes = ERROR_EXAMPLES[status];
  if (!codes) return undefined;
  const statusOf: Partial<Record<ErrorCode, number>> = { method_not_allowed: 405, request_timeout: 408 };
  return Object.fromEntries(
    codes.map(([code, message]) => [
      code,
      { summary: code, value: { code, message, status: Number(status) || (statusOf[code] ?? 500) } },
    ]),
  );
}

/** A response's JSON content with the examples of its status, when its body is the Error shape. */
function withErrorExamples(status: string, response: ResponseObject): ResponseObject {
  const json = response.content?.['application/json'];
  const examples = errorExamples(status);
  if (!examples || !isObject(json) || !isObject(json.schema) || json.schema.$ref !== ERROR_REF) return response;
  return { ...response, content: { ...response.content, 'application/json': { ...json, examples } } };
}

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
    '403': {
      description:
        'The API key is valid but may not make this request: it lacks the scope the operation needs ' +
        '(`insufficient_scope`: `pets:read` to read, `pets:write` to add), or it is used from an address its ' +
        'owner did not allow (`ip_not_allowed`). Nothing is counted against the key; the rate-limit headers ' +
        'describe its windows as they stand.',
      headers: {
        'WWW-Authenticate': {
          description:
            'With `insufficient_scope`, the RFC 6750 challenge naming the scope needed: ' +
            '`Bearer realm="animal-store", error="insufficient_scope", scope="pets:write"`.',
          schema: { type: 'string' },
        },
      },
      content: errorContent(),
    },
    '429': {
      description:
        'Rate limit exceeded (`rate_limit_exceeded`), or the key is temporarily banned for ignoring rate limits ' +
        '(`api_key_banned`). Wait `Retry-After` seconds, then back off exponentially.',
      headers: { 'Retry-After': headerRef('Retry-After') },
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
      // Inline, not the component: not every 503 carries it.
      headers: {
        'Retry-After': {
          description: 'Whole seconds to wait before retrying, when known.',
          schema: { type: 'integer', minimum: 0 },
        },
      },
      content: errorContent(),
    },
    '504': {
      description: 'The pets service did not answer in time (`upstream_timeout`).',
      content: errorContent(),
    },
    default: {
      description:
        'Any other error, in the same shape: for example 405 `method_not_allowed`, 408 `request_timeout` ' +
        '(the request was not sent in time) or 500 `internal_error`. Switch on `code`, not on the message.',
      content: errorContent(),
    },
  };
}

/**
 * The Error shape, for an upstream document that does not define it (the pets service does):
 * the one ErrorSchema, as plain JSON Schema (no $id, no TypeBox symbols).
 */
const { $id: _id, ...ERROR_SCHEMA } = JSON.parse(JSON.stringify(ErrorSchema)) as typeof ErrorSchema & { $id: string };

/** What the public document says beyond the pets service's own: where, from whom, which ban rule. */
export interface PublicDocumentOptions {
  servers: { url: string; description: string }[];
  contact: { name: string; email?: string; url?: string };
  license: { name: string; url?: string; identifier?: string };
  ban: BanPolicy;
  /** The plans in force, for the reference page's table. */
  plans: PlanBook;
}

/** The gateway's own /v1, relative: the document then describes whichever gateway served it. */
const OWN_BASE = '/v1';

export function publicDocumentOptions(config: {
  apiDocument: ApiDocumentConfig;
  ban: BanPolicy;
  plans: PlanBook;
}): PublicDocumentOptions {
  const { productionUrl, stagingUrl, contact, license } = config.apiDocument;
  const servers = [
    productionUrl
      ? { url: productionUrl, description: 'Production' }
      : { url: OWN_BASE, description: 'The gateway that served this document' },
  ];
  if (stagingUrl) servers.push({ url: stagingUrl, description: 'Staging' });
  return { servers, contact, license, ban: config.ban, plans: config.plans };
}

/** The defaults of every setting: what `npm start` and the lint gate publish. */
const DEFAULT_DOCUMENT_OPTIONS: PublicDocumentOptions = {
  servers: [{ url: OWN_BASE, description: 'The gateway that served this document' }],
  contact: { name: 'Animal store API support' },
  license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
  ban: { threshold: 50, windowMs: 60_000, durationMs: 900_000, graceMs: 500, minRetryAfterMs: 8_000 },
  plans: DEFAULT_PLANS,
};

function duration(ms: number): string {
  const seconds = Math.round(ms / 1000);
  const plural = (n: number, unit: string) => `${n.toLocaleString('en-US')} ${unit}${n === 1 ? '' : 's'}`;
  return seconds % 60 === 0 ? plural(seconds / 60, 'minute') : plural(seconds, 'second');
}

/** The ban rule, in the words the reference page uses, with the numbers in force. */
export function banRule(ban: BanPolicy): string {
  const n = ban.threshold.toLocaleString('en-US');
  const shortest =
    ban.minRetryAfterMs > 0 ? ` A 429's \`Retry-After\` is at least ${duration(ban.minRetryAfterMs)}.` : '';
  return (
    `A refused request counts toward a ban until its \`Retry-After\` has passed (for at most ` +
    `${duration(ban.windowMs)}): more than ${n} counting at once ban the key for ${duration(ban.durationMs)} ` +
    `(429 \`api_key_banned\`). Up to ${n} clients sharing a key are never banned while each waits out the ` +
    `\`Retry-After\` of its last 429.${shortest}`
  );
}

function describeApi(options: PublicDocumentOptions): string {
  const production = options.servers[0]?.url ?? OWN_BASE;
  const documentUrl = `${production}/openapi.json`;
  return [
    'List, add and read the animals of the store, through the API gateway.',
    '',
    'Every operation needs an API key sent as a bearer token: `Authorization: Bearer <API_KEY>`. ' +
      `Paths are relative to the base address, which ends in \`/v1\`: \`GET /pets\` is \`GET ${production}/pets\`.`,
    '',
    `This reference as an OpenAPI 3.1 document: [${documentUrl}](${documentUrl}).`,
    '',
    '`GET /pets/{petId}` is deprecated and will be removed on 5 December 2030: use `GET /pets` with its ' +
      'filters (`status`, or `id` for given animals) instead.',
    '',
    '## Plans and rate limits',
    '',
    ...planTable(options.plans),
    '',
    "A second, minute or hour window starts with the key's first admitted request (a fixed window), or " +
      'counts the last second, minute or hour at any moment (a sliding window: no span of that length ever ' +
      'admits more than the limit); day and month windows are calendar quotas that reset at 00:00 UTC (a ' +
      'month on the 1st). Only admitted requests count, each taking its cost from every window. A key ' +
      'without the scope a request needs gets 403 `insufficient_scope`, and a key used from outside the ' +
      'addresses it allows gets 403 `ip_not_allowed`; neither costs anything. Every response carries `X-RateLimit-Limit`, `X-RateLimit-Remaining` ' +
      'and `X-RateLimit-Reset` for the binding window (the one with the fewest requests remaining), and the ' +
      'IETF draft fields `RateLimit` and `RateLimit-Policy` for every window. Above a limit the answer is ' +
      '429 with `Retry-After`: wait that long and back off exponentially. Requests without a valid key are ' +
      'limited per client address, and so are `GET /v1`, this document and the reference at `/docs`, with or ' +
      'without a key.',
    '',
    `**Bans.** ${banRule(options.ban)}`,
    '',
    'Every error body is `{ "code", "message", "status" }` (the `Error` schema); each error response lists ' +
      'the codes it can carry. Response objects may gain fields: ignore the ones you do not know.',
  ].join('\n');
}

/** The plans in force as the reference page's table: a column per window any plan has. */
function planTable(book: PlanBook): string[] {
  const n = (value: number) => value.toLocaleString('en-US');
  const windows = WINDOW_NAMES.filter((w) => [...book.plans.values()].some((p) => p.windows?.[LIMIT_FIELDS[w]]));
  const title = (text: string) => `${text[0]?.toUpperCase()}${text.slice(1)}`;
  const notes = [...book.plans.values()].map((plan) =>
    [
      plan.algorithm === 'sliding' ? 'sliding' : '',
      plan.scopes.length < 2 ? `only ${plan.scopes.join(', ')}` : '',
      book.shadow || plan.shadow ? 'not enforced (shadow)' : '',
    ]
      .filter(Boolean)
      .join('; '),
  );
  // The spec's own table when no plan has anything to note.
  const noted = notes.some(Boolean);
  const rows = [...book.plans].map(([name, plan], i) => {
    const cells = windows.map((w) => {
      const limit = plan.windows?.[LIMIT_FIELDS[w]];
      return plan.windows ? (limit === undefined ? '–' : n(limit)) : 'agreed per key';
    });
    if (noted) cells.push(notes[i] || '–');
    return `| ${title(name)} | ${cells.join(' | ')} |`;
  });
  const costs = [...book.routeCosts].map(([route, cost]) => `\`${route}\` costs ${cost}`);
  return [
    `| Plan | ${windows.map((w) => `Requests per ${w}`).join(' | ')} |${noted ? ' Notes |' : ''}`,
    `| --- | ${windows.map(() => '---').join(' | ')} |${noted ? ' --- |' : ''}`,
    ...rows,
    ...(costs.length > 0 ? ['', `Each request costs 1 from every window, except: ${costs.join(', ')}.`] : []),
  ];
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
  for (const [path, pathItem] of Object.entries(doc.paths ?? {})) paths[relativePath(path)] = pathItem;
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
  doc.paths = { '/': { get: index }, ...paths };
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
  /** How to reach it: the proxy's pool (default: undici's global dispatcher). */
  dispatcher?: Dispatcher;
  /** How long a transformed document is served before the upstream is asked again. */
  ttlMs?: number;
  /** What the public document says beyond the upstream's (default: DEFAULT_DOCUMENT_OPTIONS). */
  document?: PublicDocumentOptions;
  now?: () => number;
  onRefreshError?: (err: unknown, servingStale: boolean) => void;
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
      const doc = publicDocument(await this.fetchUpstream(), this.opts.document);
      this.cached = { doc, at: this.now() };
      return doc;
    } catch (err) {
      this.opts.onRefreshError?.(err, this.cached !== null);
      if (this.cached) return this.cached.doc;
      throw err instanceof OpenApiUnavailable ? err : new OpenApiUnavailable(upstreamFailure(err).body);
    }
  }

  /** Failures come as undici's (or a TimeoutError), which upstreamFailure maps like the proxy's. */
  private async fetchUpstream(): Promise<OpenApiDocument> {
    const url = `${this.opts.upstream.replace(/\/+$/, '')}/v1/openapi.json`;
    const res = await request(url, {
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(this.opts.timeoutMs),
      ...(this.opts.dispatcher ? { dispatcher: this.opts.dispatcher } : {}),
    });
    if (res.statusCode < 200 || res.statusCode > 299) {
      await res.body.dump();
      throw new OpenApiUnavailable(
        errorBody(502, 'upstream_unavailable', `The pets service answered ${res.statusCode} for its API description`),
      );
    }
    let body: unknown;
    try {
      body = await res.body.json();
    } catch (err) {
      // Text that is not JSON is no document (below); a failure while reading is the upstream's.
      if (!(err instanceof SyntaxError)) throw err;
    }
    if (!isOpenApi31(body)) {
      throw new OpenApiUnavailable(
        errorBody(502, 'upstream_unavailable', 'The pets service sent no usable API description'),
      );
    }
    return body;
  }
}
