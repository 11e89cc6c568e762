import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { RATE_LIMIT_HEADER_NAMES } from './rate-limit-headers.js';

export interface CorsOptions {
  /** Exact origins (scheme://host[:port]) a browser app may call the API from. */
  origins: readonly string[];
}

/** Joined once: these go out on every answer to an allowed origin. */
const EXPOSED_HEADERS = [...RATE_LIMIT_HEADER_NAMES, 'Retry-After', 'Location', 'Link', 'Deprecation', 'Sunset'].join(
  ', ',
);
const ALLOWED_METHODS = 'GET, POST';
const ALLOWED_HEADERS = 'Authorization, Content-Type, Accept, traceparent, tracestate';
/** How long a browser may reuse a preflight answer (seconds). */
const MAX_AGE = '600';

function addVaryOrigin(vary: unknown): string {
  return typeof vary === 'string' && vary !== '' ? `${vary}, Origin` : 'Origin';
}

/**
 * CORS for the browser apps of an allow-list of origins, on every route and every answer, errors
 * included: the headers go on the reply before the gate can refuse. A preflight from an allowed
 * origin is answered here, before the gate, so it needs no key and counts against no limit; any
 * other request, and any origin not on the list, gets no CORS header and goes on as before (an
 * OPTIONS that is not an allowed preflight still gets the 405). Register before the gate.
 *
 * Not @fastify/cors: it sends Access-Control-Expose-Headers to every origin, answers an OPTIONS
 * without Origin with a text/plain 400 and takes over OPTIONS on every path.
 */
export const cors = fp(
  async (app: FastifyInstance, { origins }: CorsOptions) => {
    const allowed = new Set(origins);
    // Callback style, no allocation but the Vary value: this runs on every request.
    app.addHook('onRequest', (request, reply, done) => {
      // Answers differ by Origin, whether or not this one is allowed: caches must keep them apart.
      reply.header('vary', addVaryOrigin(reply.getHeader('vary')));
      const origin = request.headers.origin;
      if (origin === undefined || !allowed.has(origin)) return done();
      reply.header('access-control-allow-origin', origin);
      if (request.method === 'OPTIONS' && request.headers['access-control-request-method'] !== undefined) {
        reply
          .code(204)
          .header('access-control-allow-methods', ALLOWED_METHODS)
          .header('access-control-allow-headers', ALLOWED_HEADERS)
          .header('access-control-max-age', MAX_AGE)
          .header('content-length', '0')
          .send();
        return;
      }
      reply.header('access-control-expose-headers', EXPOSED_HEADERS);
      done();
    });
  },
  { name: 'cors' },
);
