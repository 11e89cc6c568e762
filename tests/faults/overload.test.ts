import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLoops, tally } from '../support/request-loop.js';
import { killAllServices, ServiceProcess } from '../support/service-process.js';

/** Resident memory of a process, from /proc (Linux), in MiB. */
function rssMiB(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) / 1024;
}

// Each body is ~900 KiB of JSON: parsing it is real CPU work, so 16 loops saturate the event loop.
const HEAVY_BODY = JSON.stringify({ name: 'heavy', categoryId: 1, padding: 'x'.repeat(900 * 1024) });

describe('load shedding (pets past saturation, on loopback)', () => {
  let pets: ServiceProcess;

  beforeAll(async () => {
    pets = await ServiceProcess.start(
      'pets',
      { LOG_LEVEL: 'warn', OVERLOAD_EVENT_LOOP_DELAY_MS: '20' },
      { ready: '/readyz' },
    );
  });
  afterAll(async () => {
    await killAllServices();
  });

  it('sheds with 503 overloaded, keeps /healthz and memory in bounds, and serves again within seconds after', async () => {
    const loops = startLoops({
      concurrency: 16,
      // Generous: on a shared 2-core machine other suites compete for the CPU too.
      timeoutMs: 20_000,
      request: () => ({
        url: `${pets.url}/v1/pets`,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: HEAVY_BODY,
      }),
    });
    // Bounded: at most 20 s of load, stopping as soon as the service has shed a good number.
    const deadline = Date.now() + 20_000;
    const healthz: number[] = [];
    let peakRss = 0;
    while (Date.now() < deadline && loops.outcomes.filter((o) => o.status === 503).length < 10) {
      const res = await fetch(`${pets.url}/healthz`, { signal: AbortSignal.timeout(10_000) });
      healthz.push(res.status);
      peakRss = Math.max(peakRss, rssMiB(pets.pid));
      await new Promise((r) => setTimeout(r, 200));
    }
    const outcomes = await loops.stop();
    const counts = tally(outcomes);

    expect(pets.alive).toBe(true);
    const shed = outcomes.filter((o) => o.status === 503);
    expect(shed.length, JSON.stringify(counts)).toBeGreaterThanOrEqual(10);
    for (const o of shed) {
      expect(JSON.parse(o.body as string)).toEqual({
        code: 'overloaded',
        message: 'The service is overloaded; retry in 2 s',
        status: 503,
      });
      expect(o.headers?.['retry-after']).toBe('2');
    }
    // Everything else was served normally; nothing timed out or broke off.
    expect(
      outcomes.every((o) => o.status === 201 || o.status === 503),
      JSON.stringify(counts),
    ).toBe(true);
    expect(healthz.every((s) => s === 200)).toBe(true);
    expect(peakRss).toBeLessThan(768);

    // Once the load is gone, it serves again within seconds.
    let recovered = 0;
    for (const until = Date.now() + 10_000; Date.now() < until; await new Promise((r) => setTimeout(r, 100))) {
      const res = await fetch(`${pets.url}/v1/pets?limit=1`);
      await res.arrayBuffer();
      if (res.status === 200) {
        recovered = Date.now();
        break;
      }
    }
    expect(recovered, 'pets still shedding 10 s after the load stopped').toBeGreaterThan(0);
  }, 60_000);
});
