import { sendError } from '@animal-store/common/error-handler.js';
import { type ErrorBody, errorBody } from '@animal-store/common/errors.js';
import httpProxy, { type FastifyHttpProxyOptions } from '@fastify/http-proxy';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { RATE_LIMIT_HEADERS } from './limits/headers.js';
import type { GatewayMetrics } from './metrics.js';

export interface ProxyOptions {
  upstream: string;
  timeoutMs: number;
  metrics: GatewayMetrics;
}

/**
 * Request headers never forwarded: the ones only the gateway may set (a client sending them is
 * ignored), and hop-by-hop ones that concern the client's connection, not ours (undici refuses
 * a request carrying them, which would turn an ordinary `Expect: 100-continue` into a 502).
 */
const DROPPED_REQUEST_HEADERS = [
  'x-api-key-id',
  'x-api-plan',
  'expect',
  'keep-alive',
  'upgrade',
  'proxy-connection',
  'te',
  'trailer',
];

function causeCode(error: unknown): string | undefined {
  let current = error as { code?: string; cause?: unknown } | undefined;
  for (let depth = 0; current && depth < 5; depth++) {
    if (current.code && !current.code.startsWith('FST_')) return current.code;
    current = current.cause as typeof current;
  }
  return (error as { code?: string }).code;
}

/** Maps what went wrong talking to the upstream onto the Error shape: never a 500 for the client. */
export function upstreamFailure(error: unknown): { kind: string; body: ErrorBody } {
  const code = (error as { code?: string }).code;
  const cause = causeCode(error);
  if (
    code === 'FST_REPLY_FROM_GATEWAY_TIMEOUT' ||
    cause === 'UND_ERR_HEADERS_TIMEOUT' ||
    cause === 'UND_ERR_CONNECT_TIMEOUT'
  ) {
    return { kind: 'timeout', body: errorBody(504, 'upstream_timeout', 'The pets service did not answer in time') };
  }
  if (
    cause === 'ECONNREFUSED' ||
    cause === 'ENOTFOUND' ||
    cause === 'EAI_AGAIN' ||
    code === 'FST_REPLY_FROM_SERVICE_UNAVAILABLE'
  ) {
    return { kind: 'refused', body: errorBody(503, 'upstream_unavailable', 'The pets service is unavailable') };
  }
  if (cause === 'ECONNRESET' || cause === 'UND_ERR_SOCKET' || cause === 'EPIPE') {
    return { kind: 'reset', body: errorBody(502, 'upstream_unavailable', 'The pets service closed the connection') };
  }
  return { kind: 'other', body: errorBody(502, 'upstream_unavailable', 'The pets service sent no usable answer') };
}

/**
 * Forwards /v1/* to the pets service over undici, streaming bodies through. The caller's
 * credentials stay here; the upstream learns who called from the key id and plan.
 */
export async function registerProxy(app: FastifyInstance, opts: ProxyOptions): Promise<void> {
  const options: FastifyHttpProxyOptions = {
    upstream: opts.upstream,
    prefix: '/v1',
    rewritePrefix: '/v1',
    undici: {
      connections: 128,
      pipelining: 1,
      keepAliveTimeout: 60_000,
      connectTimeout: Math.min(opts.timeoutMs, 5_000),
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
    },
    replyOptions: {
      // Retrying would replay non-idempotent work and multiply load on a struggling upstream.
      retryDelay: () => null,
      // reply-from hands over its own copy of the request headers, so they are edited in place.
      rewriteRequestHeaders: (request, headers) => {
        const out = headers;
        delete out.authorization;
        for (const name of DROPPED_REQUEST_HEADERS) delete out[name];
        out['x-request-id'] = request.id;
        if (request.apiKey) {
          out['x-api-key-id'] = request.apiKey.id;
          out['x-api-plan'] = request.apiKey.plan;
        }
        return out;
      },
      rewriteHeaders: (headers) => {
        for (const name of RATE_LIMIT_HEADERS) delete headers[name];
        // Hop-by-hop: the upstream's keep-alive terms are not the client's (reply-from copies them,
        // and Node then keeps a connection open that the client asked to close).
        delete headers.connection;
        delete headers['keep-alive'];
        delete headers['x-request-id'];
        return headers;
      },
      onError: (reply, { error }) => {
        const failure = upstreamFailure(error);
        opts.metrics.upstreamErrors.inc({ kind: failure.kind });
        reply.log.warn({ err: error, kind: failure.kind }, 'upstream request failed');
        sendError(reply as FastifyReply, failure.body);
      },
    },
  };
  await app.register(httpProxy, options);
}
