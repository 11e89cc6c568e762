import type { BanList, Decision, KeyLimiter, KeyUsage, WindowUsage } from '../limits/key-limiter.js';
import type { LimitPolicy, WindowRule } from '../limits/policy.js';
import type { RegionCounts } from './region-counts.js';

/**
 * A limiter that decides with the other regions' counts: each window's limit is lowered by what
 * they admitted in it (and capped at this region's share while partitioned) before the engine
 * decides, so both engines (Redis script, memory twin) decide on their own count plus the remote
 * one without a change of their own, and no request waits for another region. What it admits is
 * counted for the next publish. The answer shows the window's real limit; its `remaining` is what
 * is left once the other regions' counts are taken.
 */
export class RegionalLimiter implements KeyLimiter {
  constructor(
    private readonly inner: KeyLimiter,
    private readonly counts: RegionCounts,
    private readonly now: () => number,
  ) {}

  async consume(keyId: string, policy: LimitPolicy, cost: number, customerId?: string): Promise<Decision> {
    const now = this.now();
    const enforced = this.counts.adjust(keyId, customerId, policy, now);
    const decision = await this.inner.consume(keyId, enforced, cost, customerId);
    if (decision.outcome === 'admitted' && cost > 0) this.counts.record(keyId, customerId, policy, cost, now);
    return enforced === policy ? decision : withLimits(decision, policy, enforced);
  }

  liftBan(keyId: string, customerId?: string): Promise<void> {
    return this.inner.liftBan(keyId, customerId);
  }

  banEndsAt(keyId: string, customerId?: string): Promise<number | null> {
    return this.inner.banEndsAt(keyId, customerId);
  }

  usage(keyId: string, policy: LimitPolicy, customerId?: string): Promise<KeyUsage> {
    return this.inner.usage(keyId, policy, customerId);
  }

  customerUsage(customerId: string, policy: LimitPolicy): Promise<WindowUsage[]> {
    return this.inner.customerUsage(customerId, policy);
  }

  bans(limit: number): Promise<BanList> {
    return this.inner.bans(limit);
  }
}

/** The decision with each window's limit as the policy states it, and the refusing rule the policy's own. */
function withLimits(decision: Decision, policy: LimitPolicy, enforced: LimitPolicy): Decision {
  for (let w = 0; w < decision.windows.length; w++) {
    const state = decision.windows[w];
    const rule = policy.windows[w];
    if (state && rule) state.limit = rule.limit;
  }
  if (decision.outcome === 'limited') {
    const index = enforced.windows.indexOf(decision.refusedBy);
    decision.refusedBy = (policy.windows[index] ?? decision.refusedBy) as WindowRule;
  }
  return decision;
}
