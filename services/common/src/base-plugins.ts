import type { FastifyInstance } from 'fastify';
import { type AccessLogOptions, accessLog } from './access-log.js';
import { type ErrorHandlingOptions, errorHandling } from './error-handler.js';
import { httpBasics, type OnMalformed } from './http.js';
import { traceContext } from './trace-context.js';

export interface BasePluginOptions {
  /** Off on a listener whose requests are not traced (the metrics listener). */
  traceContext?: boolean;
  /** The access line's own fields; false on a listener that logs no request (the metrics listener). */
  accessLog?: AccessLogOptions | false;
  /** Runs for a request refused as malformed before any route (the gateway charges its address). */
  onMalformed?: OnMalformed;
  maxHeaderFields?: number;
  /** What an error no route answered means (a store that cannot be reached: 503). */
  classifyError?: ErrorHandlingOptions['classify'];
}

/**
 * The plugins every listener starts with, in this order: trace context, the access line, the raw
 * request checks, the Error handler. Their hooks run before any a service adds later, so await
 * the result before adding a hook of your own to the root instance.
 */
export function registerBasePlugins(app: FastifyInstance, opts: BasePluginOptions = {}): PromiseLike<unknown> {
  if (opts.traceContext !== false) app.register(traceContext);
  if (opts.accessLog !== false) app.register(accessLog, opts.accessLog ?? {});
  app.register(httpBasics, { onMalformed: opts.onMalformed, maxHeaderFields: opts.maxHeaderFields });
  return app.register(errorHandling, opts.classifyError ? { classify: opts.classifyError } : {});
}
