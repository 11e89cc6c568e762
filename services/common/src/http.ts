import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import fp from 'fastify-plugin';
import { sendError } from './error-handler.js';
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

export interface HttpOptions {
  logLevel: string;
  bodyLimit?: number;
  requestTimeoutMs?: number;
  trustProxy?: FastifyServerOptions['trustProxy'];
  serviceName: string;
}

/** Server options both services share: request ids, log redaction, Error-shaped client errors. */
export function serverOptions(opts: HttpOptions): FastifyServerOptions {
  return {
    logger: {
      level: opts.logLevel,
      base: { service: opts.serviceName },
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[redacted]' },
    },
    requestIdHeader: false,
    genReqId: requestIdFrom,
    bodyLimit: opts.bodyLimit ?? 1024 * 1024,
    requestTimeout: opts.requestTimeoutMs ?? 30_000,
    connectionTimeout: 0,
    keepAliveTimeout: 72_000,
    return503OnClosing: false,
    clientErrorHandler,
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
    app.addHook('preClose', async () => {
      draining = true;
    });
    app.addHook('onRequest', async (request, reply) => {
      reply.header('x-request-id', request.id);
      if (draining) {
        reply.header('connection', 'close');
        return sendError(reply, errorBody(503, 'service_unavailable', 'The server is shutting down; retry'));
      }
    });
  },
  { name: 'http-basics' },
);
