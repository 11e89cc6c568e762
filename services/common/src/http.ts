import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type {
  FastifyBaseLogger,
  FastifyError,
  FastifyHttpOptions,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  FastifyServerOptions,
} from 'fastify';
import { LogController } from 'fastify';
import fp from 'fastify-plugin';
import pino from 'pino';
import { sendError, toErrorBody } from './error-handler.js';
import { type ApiError, type ErrorBody, errorBody } from './errors.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Header fields a request may carry by default; one with more is refused (431). Node stops
 * keeping fields at its count limit without a word: a field past it, an Authorization say,
 * would otherwise be ignored as if never sent.
 */
export const MAX_HEADER_FIELDS = 1000;

/** Keeps a caller's request id only when it is short and plain, so it is safe in logs and headers. */
function requestIdFrom(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, reason, code, message] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'Request Timeout', 'request_timeout', 'The request was not received in time']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request Header Fields Too Large', 'headers_too_large', 'Request headers are too large']
        : [400, 'Bad Request', 'invalid_request', 'Malformed HTTP request'];
  rawErrorAndClose(socket, status, reason, JSON.stringify({ code, message, status }));
}

/** An Error-shaped answer written straight to a socket that never became a request, then closed. */
function rawErrorAndClose(socket: Socket, status: number, reason: string, body: string, extra = ''): void {
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Content-Type-Options: nosniff\r\n${extra}Connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/**
 * Node hands CONNECT to a 'connect' listener and, without one, closes the socket silently. No
 * resource here supports it: 405 with an empty Allow (RFC 9110: the target allows no method).
 */
function refuseConnect(_req: IncomingMessage, socket: Socket): void {
  const body = JSON.stringify(errorBody(405, 'method_not_allowed', 'CONNECT is not supported: this is not a proxy'));
  rawErrorAndClose(socket, 405, 'Method Not Allowed', body, 'Allow: \r\n');
}

/**
 * What a service does with a malformed request before it is refused, whether fastify's router
 * refused it before any hook ran or httpBasics did: the gateway charges it to the caller's address
 * and may refuse it (429) instead; null lets the 400 go out.
 */
export type OnMalformed = (request: FastifyRequest, reply: FastifyReply) => Promise<ApiError | null>;

/**
 * Errors fastify's router raises before any route or hook runs (a URL that does not decode, a
 * path parameter longer than maxParamLength): fastify would answer them in its own shape.
 */
function frameworkErrors(onMalformed: OnMalformed | undefined) {
  const send = (request: FastifyRequest, reply: FastifyReply, body: ErrorBody, headers?: Record<string, string>) => {
    reply.header('x-request-id', request.id);
    reply.header('x-content-type-options', 'nosniff');
    sendError(reply, body, headers);
    // No hook runs for these requests, the access log's onResponse included.
    (request.server as Partial<FastifyInstance>).logAccess?.(request, reply);
  };
  return (err: FastifyError, request: FastifyRequest, reply: FastifyReply): void =>
    answerMalformed(onMalformed, request, reply, frameworkErrorBody(err), (body, headers) =>
      send(request, reply, body, headers),
    );
}

function frameworkErrorBody(err: FastifyError): ErrorBody {
  if (err.code === 'FST_ERR_BAD_URL')
    return errorBody(400, 'invalid_request', 'The URL is not valid (bad percent-encoding)');
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') return errorBody(400, 'invalid_request', 'A path parameter is too long');
  return toErrorBody(err);
}

/**
 * Answers a malformed request with `invalid` (a 400), or, when the service's onMalformed refuses
 * it, with that refusal (a 429) instead. A failed onMalformed is logged and the 400 still goes out.
 */
function answerMalformed(
  onMalformed: OnMalformed | undefined,
  request: FastifyRequest,
  reply: FastifyReply,
  invalid: ErrorBody,
  send: (body: ErrorBody, headers?: Record<string, string>) => void,
): void {
  if (!onMalformed) {
    send(invalid);
    return;
  }
  onMalformed(request, reply).then(
    (refusal) => (refusal ? send(refusal.toBody(), refusal.headers) : send(invalid)),
    (err) => {
      request.log.error({ err }, 'charging a malformed request failed');
      send(invalid);
    },
  );
}

/** Node answers an `Expect` it does not know with a bare 417; this one is in the Error shape. */
function expectationFailed(_req: IncomingMessage, res: ServerResponse): void {
  const body = JSON.stringify(errorBody(417, 'invalid_request', 'Only "Expect: 100-continue" is supported'));
  res.writeHead(417, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'x-content-type-options': 'nosniff',
    connection: 'close',
  });
  res.end(body);
}

export interface HttpOptions {
  logLevel: string;
  bodyLimit?: number;
  requestTimeoutMs?: number;
  trustProxy?: FastifyServerOptions['trustProxy'];
  serviceName: string;
  /** Where log lines go instead of stdout (server.ts passes logDestination(); tests capture lines). */
  logStream?: { write(line: string): void };
  /** A logger made beforehand (createLogger), for collaborators that log before the app exists. */
  logger?: FastifyBaseLogger;
  /** Runs before fastify's router-level 400s are answered (see OnMalformed). */
  onMalformed?: OnMalformed;
}

/** A service's logger: its name on every line, secrets redacted, lines to `logStream` or stdout. */
export function createLogger(opts: Pick<HttpOptions, 'serviceName' | 'logLevel' | 'logStream'>): FastifyBaseLogger {
  return pino(
    {
      level: opts.logLevel,
      base: { service: opts.serviceName },
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[redacted]' },
    },
    opts.logStream ?? pino.destination(1),
  );
}

/** Server options both services share: request ids, log redaction, Error-shaped client errors. */
export function serverOptions(opts: HttpOptions): FastifyHttpOptions<Server, FastifyBaseLogger> {
  const requestTimeout = opts.requestTimeoutMs ?? 30_000;
  return {
    loggerInstance: opts.logger ?? createLogger(opts),
    http: {
      // Node only looks for requests past requestTimeout every connectionsCheckingInterval (30 s
      // by default), so a slow client could hold a connection for up to twice the timeout.
      connectionsCheckingInterval: Math.min(5_000, Math.max(100, Math.floor(requestTimeout / 4))),
      // Node swaps the two when headersTimeout (60 s by default) exceeds requestTimeout: the
      // whole request would then get 60 s and only the headers requestTimeout.
      headersTimeout: requestTimeout,
      // Node's own answer to a missing Host is a bare 400; httpBasics answers it in the Error shape.
      requireHostHeader: false,
    },
    requestIdHeader: false,
    genReqId: requestIdFrom,
    // The access log plugin writes the one line per request; fastify's two would double it.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: opts.bodyLimit ?? 1024 * 1024,
    requestTimeout,
    connectionTimeout: 0,
    keepAliveTimeout: 72_000,
    return503OnClosing: false,
    clientErrorHandler,
    frameworkErrors: frameworkErrors(opts.onMalformed),
    trustProxy: opts.trustProxy ?? false,
    routerOptions: { maxParamLength: 200 },
  };
}

/** RFC 9112 §3.2 / RFC 3986: uri-host [ ":" port ]; a reg-name, IPv4 or bracketed IPv6 literal. */
const HOST = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*(?::\d*)?$|^\[[0-9A-Fa-f:.]+\](?::\d*)?$/;

/** A "." or ".." path segment, plain or percent-encoded, before any query string. */
const DOT_SEGMENT = /^[^?]*?\/(?:\.|%2e){1,2}(?:[/?]|$)/i;

/**
 * Node keeps the first of two Host or Authorization fields and drops the rest, so what a proxy
 * in front saw and what this server acts on could differ: a request with either field twice is
 * refused, as is a Host that is not a host (RFC 9112 §3.2: 400).
 */
function requestProblem(raw: IncomingMessage): string | undefined {
  const target = raw.url ?? '';
  // Absolute-form (`GET http://other.host/...`) is for proxies; a path is all this server serves.
  if (target.charCodeAt(0) !== 47 /* / */) return 'The request target must be a path';
  if (DOT_SEGMENT.test(target)) return 'The path must not contain "." or ".." segments';
  const host = raw.headers.host;
  if (host !== undefined && !HOST.test(host)) return 'The Host header is not a valid host';
  const fields = raw.rawHeaders;
  let hosts = 0;
  let authorizations = 0;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i] as string;
    // Cheap first filter: only names of the two lengths are compared.
    if (name.length === 4 && name.toLowerCase() === 'host') hosts++;
    else if (name.length === 13 && name.toLowerCase() === 'authorization') authorizations++;
  }
  if (hosts > 1) return 'The request has more than one Host header';
  if (authorizations > 1) return 'The request has more than one Authorization header';
  return undefined;
}

/**
 * Echoes the request id, marks every answer nosniff, refuses ambiguous Host and Authorization
 * fields, and once the server starts closing answers new requests 503 in the Error shape with
 * Connection: close, so keep-alive clients move to another replica.
 */
export const httpBasics = fp(
  async (app: FastifyInstance, opts: { onMalformed?: OnMalformed; maxHeaderFields?: number }) => {
    let draining = false;
    const onMalformed = opts.onMalformed;
    const maxHeaderFields = opts.maxHeaderFields ?? MAX_HEADER_FIELDS;
    const tooManyHeaderFields = errorBody(
      431,
      'headers_too_large',
      `The request has more than ${maxHeaderFields} header fields`,
    );
    /** A 400 (or `body`) for a malformed request, after the service had its say (the gateway charges it). */
    const refuse = (request: FastifyRequest, reply: FastifyReply, problem: string | ErrorBody): void => {
      reply.header('connection', 'close');
      const body = typeof problem === 'string' ? errorBody(400, 'invalid_request', problem) : problem;
      answerMalformed(onMalformed, request, reply, body, (answer, headers) => sendError(reply, answer, headers));
    };
    // One over the limit, so that a request with too many fields always shows one too many.
    app.server.maxHeadersCount = maxHeaderFields + 1;
    app.server.on('checkExpectation', expectationFailed);
    app.server.on('connect', refuseConnect);
    app.addHook('preClose', async () => {
      draining = true;
    });
    // Callback style: this runs on every request, and an async hook costs a promise each time.
    app.addHook('onRequest', (request, reply, done) => {
      reply.header('x-request-id', request.id);
      reply.header('x-content-type-options', 'nosniff');
      if (draining) {
        reply.header('connection', 'close');
        sendError(reply, errorBody(503, 'upstream_unavailable', 'The server is shutting down; retry'));
        return;
      }
      if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
        // requireHostHeader is off so that this answer, not Node's bare 400, is the one sent.
        return refuse(request, reply, 'An HTTP/1.1 request needs a Host header');
      }
      // rawHeaders holds names and values, one entry each.
      if (request.raw.rawHeaders.length > 2 * maxHeaderFields) return refuse(request, reply, tooManyHeaderFields);
      const problem = requestProblem(request.raw);
      if (problem === undefined) return done();
      refuse(request, reply, problem);
    });
  },
  { name: 'http-basics' },
);
