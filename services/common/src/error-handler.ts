import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { pathOf } from './access-log.js';
import { ApiError, clipped, type ErrorBody, type ErrorCode, errorBody } from './errors.js';
import { closeAfterAnswer } from './lingering-close.js';
import { validationMessage } from './validation.js';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

const CODE_BY_STATUS: Record<number, ErrorCode> = {
  400: 'invalid_request',
  401: 'unauthorized',
  404: 'not_found',
  405: 'method_not_allowed',
  408: 'request_timeout',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  431: 'headers_too_large',
  502: 'upstream_unavailable',
  503: 'upstream_unavailable',
  504: 'upstream_timeout',
};

/** Turns any error fastify or a handler raises into the spec's Error shape, without leaking internals. */
export function toErrorBody(err: FastifyError | ApiError | Error): ErrorBody {
  if (err instanceof ApiError) return err.toBody();
  const fe = err as FastifyError;
  if (fe.validation) {
    return errorBody(400, 'invalid_request', validationMessage(fe.validationContext ?? 'request', fe.validation));
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return errorBody(415, 'unsupported_media_type', 'Content-Type must be application/json');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return errorBody(413, 'payload_too_large', 'Request body is larger than the limit');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return errorBody(400, 'invalid_request', 'Request body is empty; a JSON body is required');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return errorBody(400, 'invalid_request', 'Request body is not valid JSON');
    default:
      break;
  }
  const status = fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 600 ? fe.statusCode : 500;
  if (status >= 500) {
    return errorBody(
      status === 500 ? 500 : status,
      CODE_BY_STATUS[status] ?? 'internal_error',
      'Internal server error',
    );
  }
  if (fe instanceof SyntaxError) return errorBody(400, 'invalid_request', 'Request body is not valid JSON');
  return errorBody(status, CODE_BY_STATUS[status] ?? 'invalid_request', fe.message || 'Bad request');
}

/**
 * Whether the request declared a body that has not been read. A refusal before the body (401,
 * 429, 413...) then closes the connection: keeping it alive would make Node read and discard
 * whatever the client declared, 50 MiB or more, before the next request. It closes lingering
 * (closeAfterAnswer), so that a client still sending reads the refusal.
 */
function bodyUnread(request: FastifyRequest): boolean {
  const raw = request.raw;
  if (raw.readableEnded) return false;
  const length = raw.headers['content-length'];
  return (length !== undefined && length !== '0') || raw.headers['transfer-encoding'] !== undefined;
}

export function sendError(reply: FastifyReply, body: ErrorBody, headers: Record<string, string> = {}): FastifyReply {
  if (bodyUnread(reply.request)) closeAfterAnswer(reply);
  return reply.code(body.status).type('application/json; charset=utf-8').headers(headers).send(body);
}

function allowedMethods(app: FastifyInstance, url: string): string[] {
  const path = pathOf(url);
  return METHODS.filter((method) => app.findRoute({ method, url: path }) !== null);
}

export interface ErrorHandlingOptions {
  /**
   * The answer an error no route turned into an ApiError means, when the service knows it: a
   * store that cannot be reached (a timed-out Redis command, no MongoDB server to select) is a
   * 503 with Retry-After, not a 500. Undefined leaves the error as it is.
   */
  classify?: (err: Error) => ApiError | undefined;
}

/**
 * One error handler and one not-found handler per service. A known path asked with another
 * method answers 405 with Allow, an unknown path 404; both in the Error shape.
 */
export const errorHandling = fp(
  async (app: FastifyInstance, opts: ErrorHandlingOptions) => {
    app.setErrorHandler((raised: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      let err: FastifyError | ApiError = raised;
      if (!(raised instanceof ApiError) && opts.classify) {
        const meant = opts.classify(raised);
        if (meant) {
          // Kept for the log line below: the client sees only the answer it means.
          meant.cause = raised;
          err = meant;
        }
      }
      const body = toErrorBody(err);
      // A 5xx ApiError without a cause is a deliberate answer (limiter unavailable, key store down)
      // whose reason was logged once where it was detected: logging it again with a stack for
      // every refused request would flood the logs at error level for as long as an outage lasts.
      const deliberate = err instanceof ApiError && err.cause === undefined;
      if (body.status >= 500 && !deliberate) {
        request.log.error({ err: raised }, (err instanceof ApiError && err.logLine) || 'request failed');
      }
      // The access line already says so at info; the reason is for debugging only.
      else request.log.debug({ code: body.code, reason: err.message }, 'request refused');
      return sendError(reply, body, err instanceof ApiError ? err.headers : {});
    });
    app.setNotFoundHandler((request, reply) => {
      const allowed = allowedMethods(app, request.url);
      // A route that takes this method called notFound itself (a static file that is not
      // there): 404, not a 405 telling the client to use the method it used.
      if (allowed.length > 0 && !allowed.includes(request.method)) {
        return sendError(
          reply,
          errorBody(405, 'method_not_allowed', `${request.method} is not allowed here; use ${allowed.join(', ')}`),
          { allow: allowed.join(', ') },
        );
      }
      return sendError(
        reply,
        errorBody(404, 'not_found', `No route for ${request.method} ${clipped(pathOf(request.url))}`),
      );
    });
  },
  { name: 'error-handling' },
);
