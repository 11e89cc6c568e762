import { sendError } from '@animal-store/common/error-handler.js';
import { ApiError, type ErrorBody, errorBody } from '@animal-store/common/errors.js';
import { childTraceparent } from '@animal-store/common/trace-context.js';
import replyFrom, { type FastifyReplyFromHooks } from '@fastify/reply-from';
import type { FastifyInstance, FastifyReply, HTTPMethods } from 'fastify';
import { RATE_LIMIT_HEADERS } from './limits/headers.js';
import type { GatewayMetrics } from './metrics.js';

export interface ProxyOptions {
  upstream: string;
  timeoutMs: number;
  metrics: GatewayMetrics;
}

/**
 * What the gateway forwards, by route template: the pets API. Anything else under /v1 is the
 * gateway's own 404, another method its own 405 whose Allow lists only what works there, and
 * metrics and logs name the template (`/v1/pets/:petId`), not a wildcard.
 */
export const PROXIED_ROUTES: ReadonlyArray<{ url: string; methods: HTTPMethods[] }> = [
  { url: '/v1/pets', methods: ['GET', 'POST'] },
  { url: '/v1/pets/:petId', methods: ['GET'] },
];

/**
 * Request headers never forwarded: the ones only the gateway may set (a client sending them is
 * ignored), the client's credentials and forwarding claims (the gateway sends its own view of
 * the client), and hop-by-hop ones that concern the client's connection, not ours (undici
 * refuses a request carrying them, which would turn an ordinary `Expect: 100-continue` into a 502).
 */
const DROPPED_REQUEST_HEADERS = new Set([
  'x-api-key-id',
  'x-api-plan',
  'x-request-id',
  'authorization',
  'proxy-authorization',
  'cookie',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'forwarded',
  'x-real-ip',
  'traceparent',
  'expect',
  'keep-alive',
  'upgrade',
  'proxy-connection',
  'te',
  'trailer',
]);

/**
 * Response headers never passed back: the gateway's own rate-limit headers and request id, and
 * hop-by-hop ones (the upstream's keep-alive terms are not the client's: Node would keep open a
 * connection the client asked to close).
 */
const DROPPED_RESPONSE_HEADERS = new Set<string>([...RATE_LIMIT_HEADERS, 'connection', 'keep-alive', 'x-request-id']);

type Headers = Record<string, string | string[] | undefined>;

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
 * Forwards PROXIED_ROUTES to the pets service over undici (@fastify/reply-from), streaming
 * bodies through. The caller's credentials stay here; the upstream learns who called from the
 * key id and plan, from where from X-Forwarded-For (the address the gateway resolved), and the
 * trace from `traceparent` (this hop as the parent).
 */
export async function registerProxy(app: FastifyInstance, opts: ProxyOptions): Promise<void> {
  const replyOptions: FastifyReplyFromHooks = {
    // Retrying would replay non-idempotent work and multiply load on a struggling upstream.
    retryDelay: () => null,
    // Copied into a fresh object rather than deleted from reply-from's: deleting properties
    // turns an object into a slow dictionary, and undici then walks it once more per request.
    rewriteRequestHeaders: (request, headers) => {
      const out: Headers = {};
      // tracestate belongs to the trace the caller started; it means nothing for one started here.
      const keepTracestate = request.traceContinued;
      for (const name in headers) {
        if (DROPPED_REQUEST_HEADERS.has(name) || (name === 'tracestate' && !keepTracestate)) continue;
        out[name] = headers[name];
      }
      out['x-request-id'] = request.id;
      out['x-forwarded-for'] = request.ip;
      out.traceparent = childTraceparent(request.traceId, request.traceFlags);
      if (request.apiKey) {
        out['x-api-key-id'] = request.apiKey.id;
        out['x-api-plan'] = request.apiKey.plan;
      }
      return out;
    },
    rewriteHeaders: (headers) => {
      const out: Headers = {};
      for (const name in headers) {
        if (!DROPPED_RESPONSE_HEADERS.has(name)) out[name] = headers[name];
      }
      // Answers to keyed requests are the caller's own: never stored by a shared cache.
      out['cache-control'] = 'no-store';
      return out;
    },
    onError: (reply, { error }) => {
      const failure = upstreamFailure(error);
      opts.metrics.upstreamErrors.inc({ kind: failure.kind });
      reply.log.warn({ err: error, kind: failure.kind }, 'upstream request failed');
      sendError(reply as FastifyReply, failure.body);
    },
  };
  // Encapsulated: the pass-through body parser and reply.from apply to these routes only.
  await app.register(async (scope) => {
    await scope.register(replyFrom, {
      base: opts.upstream,
      // The access line says everything about the request; reply-from's two lines would triple it.
      disableRequestLogging: true,
      undici: {
        connections: 128,
        pipelining: 1,
        keepAliveTimeout: 60_000,
        connectTimeout: Math.min(opts.timeoutMs, 5_000),
        headersTimeout: opts.timeoutMs,
        bodyTimeout: opts.timeoutMs,
      },
    });
    // Bodies stream through to pets unread: pets parses and validates them.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    // Streaming through, fastify's bodyLimit never applies. Refuse a declared length over it
    // before proxying: the upstream's early 413 would otherwise race the body still being sent,
    // and the client would get a 502. (Chunked bodies: the upstream's 413.)
    const bodyLimit = app.initialConfig.bodyLimit ?? 1024 * 1024;
    scope.addHook('preParsing', (request, _reply, payload, done) => {
      const declared = request.headers['content-length'];
      if (declared !== undefined && Number(declared) > bodyLimit) {
        return done(
          new ApiError(413, 'payload_too_large', 'Request body is larger than the limit', { connection: 'close' }),
        );
      }
      done(null, payload);
    });
    for (const route of PROXIED_ROUTES) {
      scope.route({
        method: route.methods,
        url: route.url,
        handler: (request, reply) => reply.from(request.url, replyOptions),
      });
    }
  });
}
