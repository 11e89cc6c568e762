import { randomFillSync, randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyRequest {
    /** W3C trace id (32 hex digits): the caller's from `traceparent`, else one started here. */
    traceId: string;
    /** W3C trace flags (2 hex digits) that go with traceId. */
    traceFlags: string;
    /** Whether the caller sent a valid `traceparent` (its `tracestate` may then be passed on). */
    traceContinued: boolean;
  }
}

// version 00 exactly as W3C Trace Context level 1 defines it; an id of all zeros is invalid.
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

export interface TraceParent {
  traceId: string;
  parentId: string;
  flags: string;
}

export function parseTraceparent(header: string | string[] | undefined): TraceParent | null {
  if (typeof header !== 'string') return null;
  const match = TRACEPARENT.exec(header.trim());
  if (!match) return null;
  const [, traceId = '', parentId = '', flags = ''] = match;
  if (traceId === ZERO_TRACE || parentId === ZERO_SPAN) return null;
  return { traceId, parentId, flags };
}

export function newTraceId(): string {
  return randomUUID().replaceAll('-', '');
}

// Span ids are taken from a pool of random bytes refilled 512 ids at a time: one is made per
// proxied request, and a call into the CSPRNG for 8 bytes each time costs more than the id.
const SPAN_POOL = Buffer.alloc(8 * 512);
let spanOffset = SPAN_POOL.length;

export function newSpanId(): string {
  if (spanOffset >= SPAN_POOL.length) {
    randomFillSync(SPAN_POOL);
    spanOffset = 0;
  }
  const id = SPAN_POOL.toString('hex', spanOffset, spanOffset + 8);
  spanOffset += 8;
  // All zeros is not a valid span id (and is as likely as any other 64 bits).
  return id === ZERO_SPAN ? newSpanId() : id;
}

/** The `traceparent` to send upstream: same trace, this hop as the parent. */
export function childTraceparent(traceId: string, flags: string): string {
  return `00-${traceId}-${newSpanId()}-${flags}`;
}

/**
 * Takes the trace the caller started (`traceparent`), or starts one, so that every service logs
 * the same trace id for one request on its access line and any OpenTelemetry backend can join them.
 */
export const traceContext = fp(
  async (app: FastifyInstance) => {
    app.decorateRequest('traceId', '');
    app.decorateRequest('traceFlags', '00');
    app.decorateRequest('traceContinued', false);
    app.addHook('onRequest', (request, _reply, done) => {
      const parent = parseTraceparent(request.headers.traceparent);
      if (parent) {
        request.traceId = parent.traceId;
        request.traceFlags = parent.flags;
        request.traceContinued = true;
      } else {
        request.traceId = newTraceId();
        // Started here, and recorded here (the access line): sampled.
        request.traceFlags = '01';
      }
      done();
    });
  },
  { name: 'trace-context' },
);
