import { performance } from 'node:perf_hooks';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

/**
 * Where one request's time went, as a `Server-Timing` header on its answer (SERVER_TIMING=1, off
 * by default): a person reading a slow answer, or the bench summing many, sees the gate, the
 * limiter's wait, the upstream and the response apart. Off, a request carries `stages: null` and
 * every mark is one null check; on, it costs a few `performance.now()` calls and one header.
 */

/** Milliseconds since the time origin (performance.now()) at each point a request reached. */
export interface StageMarks {
  /** The gateway's first hook for the request (headers read, route found). */
  start: number;
  /** The limiter was asked. */
  limiter?: number;
  /** The limiter's decision came back. */
  decided?: number;
  /** The request went to the upstream. */
  upstream?: number;
  /** The upstream's answer was complete. */
  answered?: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** This request's stage marks while SERVER_TIMING is on, else null. */
    stages: StageMarks | null;
  }
}

type Stage = Exclude<keyof StageMarks, 'start'>;

/** Notes that `request` reached `stage` now; nothing when Server-Timing is off. */
export function markStage(request: FastifyRequest, stage: Stage): void {
  const stages = request.stages;
  if (stages !== null) stages[stage] = performance.now();
}

const span = (from: number | undefined, to: number | undefined): number | undefined =>
  from === undefined || to === undefined ? undefined : to - from;

/**
 * The header's value: `gate` is the gateway's own work before the upstream (key, policy, the
 * decision's headers, the body's checks), less the limiter's wait; `limiter` that wait (a Redis
 * round trip, or a batch's linger); `upstream` from sending to the last byte of its answer;
 * `response` from there to the answer being handed to the socket; `total` from the first hook.
 * A stage the request never reached (a refusal has no upstream) is left out.
 */
function serverTimingValue(stages: StageMarks, now: number): string {
  const limiter = span(stages.limiter, stages.decided);
  const beforeLimiter = span(stages.start, stages.limiter ?? stages.upstream ?? now) ?? 0;
  const afterDecision = span(stages.decided, stages.upstream ?? (stages.decided === undefined ? undefined : now)) ?? 0;
  const parts: Array<[string, number | undefined]> = [
    ['gate', beforeLimiter + afterDecision],
    ['limiter', limiter],
    ['upstream', span(stages.upstream, stages.answered)],
    ['response', span(stages.answered, now)],
    ['total', now - stages.start],
  ];
  return parts
    .filter((p): p is [string, number] => p[1] !== undefined)
    .map(([name, ms]) => `${name};dur=${ms.toFixed(3)}`)
    .join(', ');
}

/** Registered before the gate; with `enabled` false it only declares the (null) field. */
export const serverTiming = fp(
  async (app: FastifyInstance, opts: { enabled: boolean }) => {
    app.decorateRequest('stages', null);
    if (!opts.enabled) return;
    app.addHook('onRequest', (request, _reply, done) => {
      request.stages = { start: performance.now() };
      done();
    });
    app.addHook('onSend', (request, reply, payload, done) => {
      if (request.stages !== null) reply.header('server-timing', serverTimingValue(request.stages, performance.now()));
      done(null, payload);
    });
  },
  { name: 'server-timing' },
);
