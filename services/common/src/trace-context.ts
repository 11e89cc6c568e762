import { randomFillSync } from 'node:crypto';
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

function parseTraceparent(header: string | string[] | undefined): TraceParent | null {
  if (typeof header !== 'string') return null;
  const match = TRACEPARENT.exec(header.trim());
  if (!match) return null;
  const [, traceId = '', parentId = '', flags = ''] = match;
  if (traceId === ZERO_TRACE || parentId === ZERO_SPAN) return null;
  return { traceId, parentId, flags };
}

// Trace and span ids are cut from one pool of random bytes, refilled 4 KiB at a time: both are
// made on every request, and a call into the CSPRNG for 8 or 16 bytes each time costs more than
// the id itself.
const POOL = Buffer.alloc(4096);
let poolOffset = POOL.length;

function randomHex(bytes: number): string {
  if (poolOffset + bytes > POOL.length) {
    randomFillSync(POOL);
    poolOffset = 0;
  }
  const id = POOL.toString('hex', poolOffset, poolOffset + bytes);
  poolOffset += bytes;
  return id;
}

function newTraceId(): string {
  const id = randomHex(16);
  // All zeros is not a valid id (and is as likely as any other 128 bits).
  return id === ZERO_TRACE ? newTraceId() : id;
}

function newSpanId(): string {
  const id = randomHex(8);
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
