import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { loadShedding } from '../src/overload.js';

/** Holds the event loop for `ms`: what a long synchronous job, a GC pause or a starved CPU does. */
function stall(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // Spinning is the point.
  }
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

async function shedding(maxEventLoopDelayMs: number) {
  const app = Fastify();
  await app.register(loadShedding, { maxEventLoopDelayMs, maxHeapUsedBytes: 0, sampleIntervalMs: 50 });
  app.get('/', async () => 'ok');
  await app.ready();
  return app;
}

/** Stalls of `ms` back to back, a request after each: the statuses they got. */
async function statusesAfterStalls(app: Awaited<ReturnType<typeof shedding>>, ms: number, times: number) {
  const statuses: number[] = [];
  for (let i = 0; i < times; i++) {
    await nextTurn();
    stall(ms);
    statuses.push((await app.inject({ url: '/' })).statusCode);
  }
  return statuses;
}

describe('load shedding by event-loop delay', () => {
  it('sheds nothing for stalls under the threshold, even ones longer than a sample interval', async () => {
    // Stalls of 3 sample intervals leave some intervals with no delay sample at all (the
    // histogram's first tick after a reset only starts it); that is a delay of ~150 ms, not over 1 s.
    const app = await shedding(1_000);
    try {
      stall(120); // the start-up grace (two intervals after ready) passes
      const statuses = await statusesAfterStalls(app, 150, 8);
      expect(statuses).toEqual(statuses.map(() => 200));
    } finally {
      await app.close();
    }
  });

  it('sheds with 503 overloaded while the loop stalls past the threshold, sampled or not', async () => {
    // Stalls of 600 ms against 400: most intervals have no histogram sample (as above), and the
    // timer's lag (~550 ms) is what says they are over.
    const app = await shedding(400);
    try {
      stall(120);
      const statuses = await statusesAfterStalls(app, 600, 5);
      expect(statuses.filter((status) => status === 503).length, JSON.stringify(statuses)).toBeGreaterThanOrEqual(3);
      expect(statuses.every((status) => status === 200 || status === 503)).toBe(true);
    } finally {
      await app.close();
    }
  });
});
