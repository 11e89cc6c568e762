import type { WindowUsage } from '../limits/key-limiter.js';
import type { LimitPolicy, WindowScope } from '../limits/policy.js';
import { iso } from './shared.js';

/** One window's live state, as the usage routes answer it. */
interface LiveWindow {
  limit: number;
  used: number;
  remaining: number;
  resetAt: string | null;
}

/**
 * The windows of one scope (a key's own, or its customer's shared ones) by name, from what the
 * limiter read for `policy`: `usage` holds one entry per window of the policy, in its order, or
 * only those of the scope.
 */
export function liveWindows(
  policy: LimitPolicy,
  usage: readonly WindowUsage[],
  scope: WindowScope,
): Record<string, LiveWindow> {
  const windows: Record<string, LiveWindow> = {};
  for (const w of usage) {
    if (w.scope !== scope) continue;
    const rule = policy.windows.find((r) => r.name === w.name && r.scope === w.scope);
    if (!rule) continue;
    windows[w.name] = {
      limit: rule.limit,
      used: w.used,
      remaining: Math.max(0, rule.limit - w.used),
      resetAt: w.resetAt === null ? null : iso(w.resetAt),
    };
  }
  return windows;
}
