import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Writes a request's access line. The onResponse hook calls it; so do answers given before
     * any hook runs (fastify's router errors), which have no onResponse.
     */
    logAccess(request: FastifyRequest, reply: FastifyReply): void;
  }
}

export interface AccessLogOptions {
  /** What this service adds to the line (key id, limiter decision); undefined values are left out. */
  fields?: (request: FastifyRequest) => Record<string, unknown>;
}

/** The path without its query string, which may carry secrets (`?token=`) and never reaches a log. */
export function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query < 0 ? url : url.slice(0, query);
}

/**
 * One line per request at info, when the response is done: method, path (no query), status,
 * duration, trace id, plus the service's own fields; the request id comes from the request
 * logger's bindings. fastify's own per-request lines are off (disableRequestLogging).
 */
export const accessLog = fp(
  async (app: FastifyInstance, opts: AccessLogOptions) => {
    const fields = opts.fields;
    function logAccess(request: FastifyRequest, reply: FastifyReply): void {
      // Skip building the line at warn and above (pino's loggers have isLevelEnabled).
      if ((request.log as { isLevelEnabled?(level: string): boolean }).isLevelEnabled?.('info') === false) return;
      const line = {
        method: request.method,
        path: pathOf(request.url),
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
        traceId: request.traceId || undefined,
        ...fields?.(request),
      };
      request.log.info(line, 'request');
    }
    app.decorate('logAccess', logAccess);
    // At debug, also the moment a request arrives (shutdown and slow-client investigations);
    // decided once here, so that at info this costs no hook at all.
    if ((app.log as { isLevelEnabled?(level: string): boolean }).isLevelEnabled?.('debug')) {
      app.addHook('onRequest', (request, _reply, done) => {
        request.log.debug({ method: request.method, path: pathOf(request.url) }, 'request received');
        done();
      });
    }
    app.addHook('onResponse', (request, reply, done) => {
      logAccess(request, reply);
      done();
    });
  },
  { name: 'access-log', dependencies: ['trace-context'] },
);
