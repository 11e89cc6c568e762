import { describe, expect, it } from 'vitest';
import type { AuthFailures } from '../../src/limits/auth-failures.js';

const WINDOW_MS = 60_000;

/** What every AuthFailures must do; `make` gives a fresh, empty one. Times are the gateway's clock. */
export function authFailuresContract(name: string, make: () => Promise<AuthFailures>): void {
  describe(`${name} (AuthFailures contract)`, () => {
    // Now, not a fixed date: a Redis store's counters expire on Redis's own clock as well.
    const t0 = Date.now();

    it('counts an address’s failures in a window that starts at its first, each address apart', async () => {
      const failures = await make();
      expect(await failures.record('198.51.100.1', t0, WINDOW_MS)).toEqual({ count: 1, resetAt: t0 + WINDOW_MS });
      expect(await failures.record('198.51.100.1', t0 + 1_000, WINDOW_MS)).toEqual({
        count: 2,
        resetAt: t0 + WINDOW_MS,
      });
      expect(await failures.record('198.51.100.2', t0 + 1_000, WINDOW_MS)).toEqual({
        count: 1,
        resetAt: t0 + 1_000 + WINDOW_MS,
      });
    });

    it('starts again from 1 once the window has ended on the clock it is given', async () => {
      const failures = await make();
      await failures.record('198.51.100.3', t0, WINDOW_MS);
      await failures.record('198.51.100.3', t0 + 59_999, WINDOW_MS);
      expect(await failures.record('198.51.100.3', t0 + WINDOW_MS, WINDOW_MS)).toEqual({
        count: 1,
        resetAt: t0 + 2 * WINDOW_MS,
      });
    });

    it('counts failures at once exactly: 20 give the counts 1 to 20', async () => {
      const failures = await make();
      const counts = await Promise.all(
        Array.from({ length: 20 }, () => failures.record('198.51.100.4', t0, WINDOW_MS)),
      );
      expect(counts.map((c) => c.count).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    });
  });
}
