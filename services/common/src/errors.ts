import type { Static } from 'typebox';
import type { ErrorSchema } from './error-schema.js';

/** Every error code the API answers with; clients switch on these, so the set only grows. */
export type ErrorCode =
  | 'missing_api_key'
  | 'invalid_api_key'
  | 'expired_api_key'
  | 'rate_limit_exceeded'
  | 'api_key_banned'
  | 'credits_exhausted'
  | 'insufficient_scope'
  | 'ip_not_allowed'
  | 'invalid_request'
  | 'not_found'
  | 'method_not_allowed'
  | 'payload_too_large'
  | 'headers_too_large'
  | 'unsupported_media_type'
  | 'request_timeout'
  | 'upstream_unavailable'
  | 'upstream_timeout'
  | 'rate_limiter_unavailable'
  | 'overloaded'
  | 'unauthorized'
  | 'forbidden'
  | 'conflict'
  | 'admin_rate_limited'
  | 'store_unavailable'
  | 'idempotency_key_reused'
  | 'internal_error';

export type ErrorBody = Static<typeof ErrorSchema>;

/** An error whose status, code and message are safe to show to the client as they are. */
export class ApiError extends Error {
  /** What the log says of this error, when its cause needs saying (which MongoDB failure it was); never sent. */
  logLine?: string;

  constructor(
    readonly statusCode: number,
    readonly code: ErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }

  toBody(): ErrorBody {
    return { code: this.code, message: this.message, status: this.statusCode };
  }
}

/** Most characters of client-supplied text a message repeats: enough to recognise it, too few to bloat an answer. */
const QUOTE_LIMIT = 40;

/** Client-supplied text as an error message may quote it: whole when short, else its start and "…". */
export function clipped(text: string): string {
  if (text.length <= QUOTE_LIMIT) return text;
  // Never half a surrogate pair: the cut would leave a lone surrogate in the message.
  const code = text.charCodeAt(QUOTE_LIMIT - 1);
  const end = code >= 0xd800 && code <= 0xdbff ? QUOTE_LIMIT - 1 : QUOTE_LIMIT;
  return `${text.slice(0, end)}…`;
}

export function errorBody(status: number, code: ErrorCode, message: string): ErrorBody {
  return { code, message, status };
}
