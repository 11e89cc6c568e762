import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type {
  FastifyError,
  FastifyHttpOptions,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  FastifyServerOptions,
} from 'fastify';
import fp from 'fastify-plugin';
import { sendError, toErrorBody } from './error-handler.js';
import { errorBody } from './errors.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Keeps a caller's request id only when it is short and plain, so it is safe in logs and headers. */
export function requestIdFrom(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, reason, code, message] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'Request Timeout', 'request_timeout', 'The request was not received in time']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request Header Fields Too Large', 'invalid_request', 'Request headers are too large']
        : [400, 'Bad Request', 'invalid_request', 'Malformed HTTP request'];
  const body = JSON.stringify({ code, message, status });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/**
 * Errors fastify's router raises before any route or hook runs (a URL that does not decode, a
 * path parameter longer than maxParamLength): fastify would answer them in its own shape.
 */
function frameworkErrors(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const body =
    err.code === 'FST_ERR_BAD_URL'
      ? errorBody(400, 'invalid_request', 'The URL is not valid (bad percent-encoding)')
      : err.code === 'FST_ERR_MAX_PARAM_LENGTH'
        ? errorBody(400, 'invalid_request', 'A path parameter is too long')
        : toErrorBody(err);
  reply.header('x-request-id', request.id);
  sendError(reply, body);
}

/** Node answers an `Expect` it does not know with a bare 417; this one is in the Error shape. */
function expectationFailed(_req: IncomingMessage, res: ServerResponse): void {
  const body = JSON.stringify(errorBody(417, 'invalid_request', 'Only "Expect: 100-continue" is supported'));
  res.writeHead(417, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
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
  /** Where log lines go instead of stdout (tests capture them here). */
  logStream?: { write(line: string): void };
}

/** Server options both services share: request ids, log redaction, Error-shaped client errors. */
export function serverOptions(opts: HttpOptions): FastifyHttpOptions<Server> {
  const requestTimeout = opts.requestTimeoutMs ?? 30_000;
  return {
    logger: {
      level: opts.logLevel,
      base: { service: opts.serviceName },
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[redacted]' },
      ...(opts.logStream ? { stream: opts.logStream } : {}),
    },
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
    bodyLimit: opts.bodyLimit ?? 1024 * 1024,
    requestTimeout,
    connectionTimeout: 0,
    keepAliveTimeout: 72_000,
    return503OnClosing: false,
    clientErrorHandler,
    frameworkErrors,
    trustProxy: opts.trustProxy ?? false,
    routerOptions: { maxParamLength: 200 },
  };
}

/**
 * Echoes the request id, and once the server starts closing answers new requests 503 in the
 * Error shape with Connection: close, so keep-alive clients move to another replica.
 */
export const httpBasics = fp(
  async (app: FastifyInstance) => {
    let draining = false;
    app.server.on('checkExpectation', expectationFailed);
    app.addHook('preClose', async () => {
      draining = true;
    });
    // Callback style: this runs on every request, and an async hook costs a promise each time.
    app.addHook('onRequest', (request, reply, done) => {
      reply.header('x-request-id', request.id);
      if (!draining && request.headers.host !== undefined) return done();
      if (draining) {
        reply.header('connection', 'close');
        sendError(reply, errorBody(503, 'upstream_unavailable', 'The server is shutting down; retry'));
      } else if (request.raw.httpVersion === '1.1') {
        // requireHostHeader is off so that this answer, not Node's bare 400, is the one sent.
        reply.header('connection', 'close');
        sendError(reply, errorBody(400, 'invalid_request', 'An HTTP/1.1 request needs a Host header'));
      } else {
        done();
      }
    });
  },
  { name: 'http-basics' },
);
