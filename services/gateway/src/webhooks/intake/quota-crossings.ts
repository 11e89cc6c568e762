import type { WindowState } from '../../limits/key-limiter.js';
import { isCalendarName } from '../../limits/windows.js';
import type { QuotaData } from '../event-types.js';

/**
 * The thresholds (percent) that this admitted request of `cost` crossed in its day and month
 * windows: those with `used` below them before it and at or above them after it. Counts only
 * grow within a period and the shared limiter orders every request, so across all replicas one
 * request crosses each threshold once per period; a customer's window, shared by its keys, is
 * crossed once for the customer, by whichever key's request. Runs on every admitted request: a few integer
 * comparisons per window and no allocation unless something was crossed.
 */
export function quotaCrossings(
  windows: readonly WindowState[],
  cost: number,
  percents: readonly number[],
): QuotaData[] | undefined {
  let crossed: QuotaData[] | undefined;
  for (const window of windows) {
    if (!isCalendarName(window.name)) continue;
    const used = window.limit - window.remaining;
    const before = used - cost;
    for (let i = 0; i <= percents.length; i++) {
      const percent = i < percents.length ? (percents[i] as number) : 100;
      const at = Math.ceil((window.limit * percent) / 100);
      if (before >= at || used < at) continue;
      crossed ??= [];
      crossed.push({
        window: window.name,
        limit: window.limit,
        used,
        // Calendar windows reset on the minute: rounding makes every replica name the same period.
        resetAt: new Date(Math.round(window.resetAt / 60_000) * 60_000).toISOString(),
        threshold: percent,
        ...(window.scope === 'customer' ? { scope: 'customer' as const } : {}),
      });
    }
  }
  return crossed;
}
