import { ErrorSchema } from '@animal-store/common/error-schema.js';
import type { ErrorBody, ErrorCode } from '@animal-store/common/errors.js';
import type { RATE_LIMIT_HEADER_NAMES } from '../gate/rate-limit-headers.js';
import { UPSTREAM_FAILURES } from '../proxy/upstream-failure.js';

/*
 * What the gateway adds to every operation of the public document: the responses only it gives,
 * the rate-limit header components, and the codes of every Error response as named examples.
 */

export type Json = Record<string, unknown>;
export interface ResponseObject {
  description: string;
  headers?: Record<string, unknown>;
  content?: Record<string, unknown>;
  [key: string]: unknown;
}

export function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Header components the gateway adds; every response of every operation refers to the rate-limit ones. */
export const HEADER_COMPONENTS: Record<(typeof RATE_LIMIT_HEADER_NAMES)[number] | 'Retry-After', Json> = {
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

export const headerRef = (name: string) => ({ $ref: `#/components/headers/${name}` });
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
  '402': [
    [
      'credits_exhausted',
      'Out of credits: customer cus_4hY0c2Qm9XbLr1Tz has 0 left and this request costs 1; no refill covering it is due: top up the balance',
    ],
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
export function withErrorExamples(status: string, response: ResponseObject): ResponseObject {
  const json = response.content?.['application/json'];
  const examples = errorExamples(status);
  if (!examples || !isObject(json) || !isObject(json.schema) || json.schema.$ref !== ERROR_REF) return response;
  return { ...response, content: { ...response.content, 'application/json': { ...json, examples } } };
}

/** Responses only the gateway gives, whatever the operation. */
export function gatewayResponses(): Record<string, ResponseObject> {
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
    '402': {
      description:
        'The customer of the key (or the key, standing for itself) is out of credits (`credits_exhausted`): its ' +
        'windows had room, its credit balance did not, and nothing was taken. Waiting does not help unless a ' +
        'refill is due: then `Retry-After` says when; otherwise the balance must be topped up. The rate-limit ' +
        'headers describe the windows as they stand.',
      headers: {
        'Retry-After': {
          description: 'Whole seconds until the next refill, present only when one is due that covers the request.',
          schema: { type: 'integer', minimum: 0 },
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
const { $id: _id, ...ERROR_SCHEMA } = JSON.parse(JSON.stringify(ErrorSchema)) as typeof ErrorSchema & {
  $id: string;
};

export { ERROR_SCHEMA };
