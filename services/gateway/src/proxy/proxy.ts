import type { IncomingHttpHeaders } from 'node:http';
import { finished, type Readable, Transform, type TransformCallback } from 'node:stream';
import { encodedBodyRefusal } from '@animal-store/common/content-encoding.js';
import { sendError } from '@animal-store/common/error-handler.js';
import { ApiError, type ErrorBody, errorBody } from '@animal-store/common/errors.js';
import { childTraceparent } from '@animal-store/common/trace-context.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type Dispatcher, Pool } from 'undici';
import type { CreditRefunds } from '../credits/credit-refunds.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import { markStage } from '../observability/server-timing.js';
import { type AnsweredBy, type BillableStatuses, isBilled } from '../plans/billable.js';
import type { UsageHistory } from '../usage/usage-history.js';
import { BUFFERED_BODY_BYTES, ForwardHandler, type ForwardPolicy, type ResponseHeaders } from './forward-handler.js';
import { PROXIED_ROUTES, routeName } from './proxied-routes.js';
import { UPSTREAM_FAILURES, upstreamFailure } from './upstream-failure.js';

export interface ProxyOptions {
  /** The connection pool to the pets service (upstreamPool). */
  pool: Dispatcher;
  metrics: GatewayMetrics;
  /** Units each route takes from a key's windows (PlanBook.routeCosts); 1 when absent. */
  costs: ReadonlyMap<string, number>;
  /** Told of admitted requests the upstream did not serve, which are not billed, and of those it served, by route. */
  history: Pick<UsageHistory, 'upstreamFailed' | 'served'>;
  /** Told of admitted requests that spent credits and were not served: their credits are given back. */
  refunds: Pick<CreditRefunds, 'upstreamFailed'>;
  /** The statuses a plan bills (PlanDefinition.billable; undefined: the default). */
  billable: (plan: string) => BillableStatuses | undefined;
}

/**
 * Where a decision is in the usage history: the shared limiter's (Redis) and the embedded one's.
 * The fallback's decisions (Redis failing) are not, so neither are their failures.
 */
const IN_HISTORY = new Set(['shared', 'memory']);

/**
 * An admitted request's answer, told to the history in the hour of its admission. Not served: for
 * its key and, as the customer's hours are the sum of its keys', its customer; and the credits it
 * spent, if it spent any, to be given back (the fallback's decisions spend none and are skipped
 * here with their history). Served: its units
 * by route, for the customer (or the key standing for itself) only, which the metering export
 * reads (metering/); one Map increment here, written in batches (RedisUsageHistory.served).
 */
function countAnswer(
  opts: Pick<ProxyOptions, 'history' | 'refunds' | 'billable'>,
  request: FastifyRequest,
  reply: FastifyReply,
  by: AnsweredBy,
): void {
  const { history } = opts;
  const key = request.apiKey;
  const { admittedAt, admittedHourShiftMs: shift } = request;
  if (
    !key ||
    request.limiterDecision !== 'admitted' ||
    admittedAt === undefined ||
    !IN_HISTORY.has(request.limiterSource ?? '')
  ) {
    return;
  }
  const { cost = 1, route } = request.routeOptions.config;
  // The one billable rule (plans/billable.ts) decides the history's units and the credits alike.
  if (isBilled(opts.billable(key.plan), reply.statusCode, by)) {
    if (route !== undefined) history.served(key.customerId ?? key.id, route, cost, admittedAt, shift);
    return;
  }
  history.upstreamFailed(key.id, cost, admittedAt, shift);
  if (key.customerId !== undefined) history.upstreamFailed(key.customerId, cost, admittedAt, shift);
  if (request.creditOwner !== undefined) opts.refunds.upstreamFailed(request.creditOwner, cost, admittedAt);
}

/**
 * Request headers never forwarded: the ones only the gateway may set (a client sending them is
 * ignored), the client's credentials and forwarding claims (the gateway sends its own view of
 * the client), hop-by-hop ones that concern the client's connection, not ours (undici
 * refuses a request carrying them, which would turn an ordinary `Expect: 100-continue` into a 502),
 * and Host and the framing, which undici sets for the upstream.
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
  'connection',
  'transfer-encoding',
  'host',
]);

/**
 * The only upstream response headers passed back; anything else the upstream sets (cookies,
 * Server, X-Powered-By, its own Retry-After or rate-limit headers, hop-by-hop fields) stays here.
 * The framing is the gateway's own, Content-Length excepted: it is the upstream body's, which
 * goes through unchanged.
 */
const ALLOWED_RESPONSE_HEADERS: readonly string[] = [
  'content-type',
  'content-length',
  'location',
  'link',
  'deprecation',
  'sunset',
  'etag',
  'last-modified',
];

type Headers = Record<string, string | string[] | undefined>;

const BODY_TOO_LARGE = 'Request body is larger than the limit';

/**
 * A chunked request body on its way to the upstream, failed with a 413 instead of passing on the
 * chunk that takes it past the limit: the upstream never sees more than the limit, so its own
 * 413 (and the connection it closes under the rest of the body) never races the gateway's.
 */
class BodyLimit extends Transform {
  private bytes = 0;

  constructor(private readonly limit: number) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.limit) done(new ApiError(413, 'payload_too_large', BODY_TOO_LARGE));
    else done(null, chunk);
  }
}

/**
 * The request headers the upstream gets: the client's, less DROPPED_REQUEST_HEADERS and any the
 * client's Connection header names, plus who called (key id and plan), from where
 * (X-Forwarded-For, the address the gateway resolved), the request id and the trace (this hop
 * as the parent). Host is undici's: the upstream's own.
 */
function upstreamHeaders(request: FastifyRequest): Headers {
  const headers = request.headers;
  const out: Headers = {};
  // Most clients send `Connection: keep-alive` on every request: nothing to parse there.
  const connection = headers.connection;
  const hopByHop =
    connection === undefined || connection === 'keep-alive' || connection === 'close'
      ? undefined
      : connectionTokens(connection);
  // tracestate belongs to the trace the caller started; it means nothing for one started here.
  const keepTracestate = request.traceContinued;
  for (const name in headers) {
    if (DROPPED_REQUEST_HEADERS.has(name) || (name === 'tracestate' && !keepTracestate) || hopByHop?.has(name))
      continue;
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
}

/** RFC 9110 §7.6.1: the header names a Connection field lists are for this hop only. */
function connectionTokens(value: string | string[]): Set<string> {
  const tokens = new Set<string>();
  for (const token of String(value).split(',')) tokens.add(token.trim().toLowerCase());
  return tokens;
}

/**
 * The response headers the client gets: the upstream's in ALLOWED_RESPONSE_HEADERS (and the
 * Retry-After of a 503), marked no-store: answers to keyed requests are the caller's own, never for
 * a shared cache, so an upstream Vary would mean nothing (and would replace the CORS hook's). A
 * repeated field keeps every value.
 */
function clientHeaders(upstream: IncomingHttpHeaders, status: number): ResponseHeaders {
  const out: ResponseHeaders = {};
  // undici has already parsed every field into `upstream`: picking the few allowed ones out is
  // cheaper than walking all of them again.
  for (let i = 0; i < ALLOWED_RESPONSE_HEADERS.length; i++) {
    const name = ALLOWED_RESPONSE_HEADERS[i] as string;
    const value = upstream[name];
    if (value !== undefined) out[name] = value;
  }
  // pets' 503 overloaded says when to come back; the gateway's own 429s set their own.
  const retryAfter = status === 503 ? upstream['retry-after'] : undefined;
  if (retryAfter !== undefined) out['retry-after'] = retryAfter;
  out['cache-control'] = 'no-store';
  return out;
}

const JSON_TYPE = /^application\/(?:[\w.-]+\+)?json\s*(?:;|$)/i;
const ERROR_CODE = /^[a-z][a-z0-9_]*$/;

/**
 * Whether an upstream error answer is already an Error body for its status: JSON, exactly
 * code, message and status, that status the HTTP one. Only such a body reaches the client.
 */
function isErrorBody(status: number, headers: ResponseHeaders, body: Buffer | undefined): boolean {
  const type = headers['content-type'];
  if (body === undefined || typeof type !== 'string' || !JSON_TYPE.test(type)) return false;
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    return false;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const { code, message, status: claimed, ...rest } = value as Record<string, unknown>;
  return (
    typeof code === 'string' &&
    ERROR_CODE.test(code) &&
    typeof message === 'string' &&
    claimed === status &&
    Object.keys(rest).length === 0
  );
}

/** The Error bodies given for the error statuses pets answers with, when its own body is not one. */
const REPLACEMENTS: Partial<Record<number, ErrorBody>> = {
  400: errorBody(400, 'invalid_request', 'The request is not valid'),
  404: errorBody(404, 'not_found', 'Not found'),
  405: errorBody(405, 'method_not_allowed', 'This method is not allowed here'),
  413: errorBody(413, 'payload_too_large', BODY_TOO_LARGE),
  415: errorBody(415, 'unsupported_media_type', 'Content-Type must be application/json'),
  500: errorBody(500, 'internal_error', 'The pets service failed to answer the request'),
  504: UPSTREAM_FAILURES.timeout,
};

/**
 * The Error body given instead of an upstream error answer that is not one: the same status, a
 * code for it, and a message of our own (the upstream's text may name hosts, files, stacks).
 */
function replacementBody(status: number): ErrorBody {
  const known = REPLACEMENTS[status];
  if (known) return known;
  if (status >= 400 && status < 500) return errorBody(status, 'invalid_request', 'The request was refused');
  if (status > 500 && status < 600) return { ...UPSTREAM_FAILURES.refused, status };
  // Not a status the client can be given.
  return UPSTREAM_FAILURES.other;
}

/**
 * The gateway's one connection pool to the pets service, for the proxy and for the API
 * reference's fetch of pets' document: its timeouts are UPSTREAM_TIMEOUT_MS, its failures
 * undici's (upstream-failure.ts maps them). The caller destroys it when the app closes.
 */
export function upstreamPool(upstream: string, timeoutMs: number): Pool {
  return new Pool(new URL(upstream).origin, {
    connections: 128,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    connect: { timeout: Math.min(timeoutMs, 5_000) },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
}

/**
 * Forwards PROXIED_ROUTES to the pets service over the upstream pool (forward-handler.ts), request
 * bodies streamed through unread. The caller's credentials stay here (upstreamHeaders). Each
 * request is sent once: retrying would replay non-idempotent work and multiply the load on a
 * struggling upstream.
 */
export async function registerProxy(app: FastifyInstance, opts: ProxyOptions): Promise<void> {
  const { pool } = opts;
  // The requests the gateway answered for a pets service it could not reach or that timed out:
  // never billed, whatever a plan's billable lists (isBilled).
  const unanswered = new WeakSet<FastifyRequest>();
  const policy: ForwardPolicy = {
    responseHeaders: clientHeaders,
    replaceError: (reply, status, headers, body) => {
      if (isErrorBody(status, headers, body)) return false;
      opts.metrics.upstreamErrors.inc({ kind: 'error_body' });
      reply.log.warn(
        {
          upstreamStatus: status,
          upstreamType: headers['content-type'],
          upstreamBytes: body?.length ?? `>${BUFFERED_BODY_BYTES}`,
        },
        'upstream error answer is not an Error body; answered with a generic one',
      );
      sendError(reply, replacementBody(status));
      return true;
    },
    fail: (reply, error) => {
      // Raised here, not by the upstream (the client's body outgrew the limit, see BodyLimit):
      // undici aborts the upstream request with it, and the client gets it as it is.
      if (error instanceof ApiError) return void sendError(reply, error.toBody(), error.headers);
      const failure = upstreamFailure(error);
      opts.metrics.upstreamErrors.inc({ kind: failure.kind });
      reply.log.warn({ err: error, kind: failure.kind }, 'upstream request failed');
      unanswered.add(reply.request);
      sendError(reply, failure.body);
    },
  };
  const forward = (request: FastifyRequest, reply: FastifyReply): void => {
    const method = request.method as Dispatcher.HttpMethod;
    const headers = upstreamHeaders(request);
    // A body on GET or HEAD means nothing to the upstream; it is not forwarded, nor its length.
    const bodyless = method === 'GET' || method === 'HEAD';
    if (bodyless && headers['content-length'] !== undefined) headers['content-length'] = undefined;
    const body = bodyless ? null : ((request.body as Readable | undefined) ?? null);
    // A request undici refuses outright (a header value it will not send) comes back through
    // the handler's onResponseError, like any other failure.
    markStage(request, 'upstream');
    pool.dispatch({ path: request.url, method, headers, body }, new ForwardHandler(reply, policy));
  };
  // Encapsulated: the pass-through body parser applies to these routes only.
  await app.register(async (scope) => {
    // An admitted request the upstream did not serve took its cost from the key's windows (the
    // limiter decided before the upstream answered, and giving it back would be a second write
    // racing the next requests), but is not billed: the history counts it apart, and its credits,
    // which are money, are given back (batched, off the request path: CreditRefunds).
    scope.addHook('onResponse', (request, reply, done) => {
      countAnswer(opts, request, reply, unanswered.has(request) ? 'gateway' : 'upstream');
      done();
    });
    // Bodies stream through to pets unread: pets parses and validates them.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    // Streaming through, fastify's bodyLimit never applies. A declared length over it is refused
    // before proxying; a chunked body is counted on its way through (BodyLimit). Either way the
    // upstream never gets enough to answer its own 413, which would race the body still being
    // sent and reach the client as a 502.
    const bodyLimit = app.initialConfig.bodyLimit ?? 1024 * 1024;
    scope.addHook('preParsing', (request, _reply, payload, done) => {
      const encoded = encodedBodyRefusal(request.headers);
      if (encoded) return done(encoded);
      const declared = request.headers['content-length'];
      if (declared !== undefined) {
        // sendError closes the connection: the declared body is unread.
        if (Number(declared) > bodyLimit) return done(new ApiError(413, 'payload_too_large', BODY_TOO_LARGE));
        // Node ends the body at its declared length: nothing to count.
        return done(null, payload);
      }
      if (request.headers['transfer-encoding'] === undefined) return done(null, payload);
      const limited = new BodyLimit(bodyLimit);
      // Piped, not pipelined: the limit's error must not destroy the client's request, whose
      // socket still has to carry the 413. A client that breaks off its body fails the upstream
      // request as it did unwrapped.
      payload.pipe(limited);
      finished(payload, (err) => {
        if (err) limited.destroy(err);
      });
      done(null, limited);
    });
    for (const route of PROXIED_ROUTES) {
      const name = routeName(route.method, route.url);
      const cost = opts.costs.get(name) ?? 1;
      scope.route({
        method: route.method,
        url: route.url,
        handler: forward,
        config: { scope: route.scope, cost, route: name },
      });
    }
  });
}
