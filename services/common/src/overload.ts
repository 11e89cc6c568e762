import { getHeapStatistics } from 'node:v8';
import underPressure from '@fastify/under-pressure';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { EnvReader } from './env.js';
import { ApiError } from './errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** @fastify/under-pressure's per-route handler; `neverShed` uses it to keep a route answering. */
    pressureHandler?: (request: FastifyRequest, reply: FastifyReply, type: string, value?: number) => undefined;
  }
}

export interface OverloadConfig {
  /** Shed while the event loop's mean delay exceeds this (0: never for delay). */
  maxEventLoopDelayMs: number;
  /** Shed while the V8 heap in use exceeds this (0: never for heap). */
  maxHeapUsedBytes: number;
}

/** How long a shed client is told to wait: long enough for a sample interval or two to clear it. */
const OVERLOAD_RETRY_SECONDS = 2;

/** OVERLOAD_EVENT_LOOP_DELAY_MS (default 1000) and OVERLOAD_HEAP_USED_MB (default 90% of V8's heap limit). */
export function readOverloadConfig(read: EnvReader): OverloadConfig {
  const defaultHeapMb = Math.floor((getHeapStatistics().heap_size_limit * 0.9) / 1024 / 1024);
  return {
    maxEventLoopDelayMs: read.int('OVERLOAD_EVENT_LOOP_DELAY_MS', 1_000, 0, 60_000),
    maxHeapUsedBytes: read.int('OVERLOAD_HEAP_USED_MB', defaultHeapMb, 0, 1_048_576) * 1024 * 1024,
  };
}

/**
 * How late a repeating timer of `intervalMs` fired last: the event loop's delay over the last
 * interval, measured where a delay histogram has nothing to say.
 */
function timerLag(intervalMs: number): { last(): number; stop(): void } {
  let due = Date.now() + intervalMs;
  let last = 0;
  const timer = setInterval(() => {
    const now = Date.now();
    last = Math.max(0, now - due);
    due = now + intervalMs;
  }, intervalMs);
  timer.unref();
  return { last: () => last, stop: () => clearInterval(timer) };
}

/** Route config for what must answer under load: liveness (metrics have a listener of their own). */
export const neverShed = { pressureHandler: () => undefined };

export interface LoadSheddingOptions extends OverloadConfig {
  /** Adds what the service says about a shed request beyond the Error (the gateway: rate-limit headers). */
  onShed?: (request: FastifyRequest, reply: FastifyReply, retryAfterSeconds: number) => void;
  /** How often load is sampled; tests shorten it. */
  sampleIntervalMs?: number;
}

/**
 * Answers `503 overloaded` with Retry-After, before any other work, while the process is past
 * its event-loop delay or heap threshold: a saturated replica then refuses quickly instead of
 * queueing every client into timeouts, and memory stays bounded. One warn line per episode.
 */
export const loadShedding = fp(
  async (app: FastifyInstance, opts: LoadSheddingOptions) => {
    let episodeEndsAt = 0;
    const sampleInterval = opts.sampleIntervalMs ?? 500;
    // Start-up work (compiling schemas, connecting) blocks the loop before the first request; the
    // samples that saw it say nothing about load, so delay only counts once they have passed.
    let delayCountsFrom = Number.POSITIVE_INFINITY;
    app.addHook('onReady', async () => {
      delayCountsFrom = Date.now() + 2 * sampleInterval;
    });
    const lag = timerLag(sampleInterval);
    app.addHook('onClose', async () => lag.stop());
    await app.register(underPressure, {
      maxEventLoopDelay: opts.maxEventLoopDelayMs,
      maxHeapUsedBytes: opts.maxHeapUsedBytes,
      sampleInterval,
      // A rejected promise reaches the service's error handler, which writes the Error shape; a
      // resolved one lets the request through.
      pressureHandler: async (request, reply, type, value) => {
        const now = Date.now();
        if (type === 'eventLoopDelay') {
          if (now < delayCountsFrom) return;
          // Infinity: under-pressure's word for an interval its histogram holds no sample of. The
          // histogram's first tick after a reset only starts it, so any stall longer than what is
          // left of an interval (~500 ms) gives that, far under a threshold of seconds: the timer's
          // lag says how long the stall was.
          if (!Number.isFinite(value) && lag.last() <= opts.maxEventLoopDelayMs) return;
        }
        if (now > episodeEndsAt) {
          const measured = Number.isFinite(value) ? value : `no sample; a timer ${lag.last()} ms late`;
          request.log.warn({ type, value: measured }, 'overloaded: shedding requests with 503 until load drops');
        }
        episodeEndsAt = now + 10_000;
        opts.onShed?.(request, reply, OVERLOAD_RETRY_SECONDS);
        throw new ApiError(503, 'overloaded', `The service is overloaded; retry in ${OVERLOAD_RETRY_SECONDS} s`, {
          'retry-after': String(OVERLOAD_RETRY_SECONDS),
        });
      },
    });
  },
  { name: 'load-shedding' },
);
