import { LRUCache } from 'lru-cache';

/** The failed admin authentications of one address in its current window. */
export interface FailureCount {
  /** Failures in the window, the one just counted included. */
  count: number;
  /** When the window ends (epoch ms on the gateway's clock); it starts at its first failure. */
  resetAt: number;
}

/**
 * Wrong admin tokens per address (admin/auth-limit.ts): counted where every replica sees them
 * (Redis), or in this process's memory. Behind a load balancer a guesser's tries spread over the
 * replicas, and a count per replica would give it N times the budget.
 */
export interface AuthFailures {
  readonly kind: 'memory' | 'redis';
  /** Counts a failure of `address` at `at`, starting a window of `windowMs` when none runs. */
  record(address: string, at: number, windowMs: number): Promise<FailureCount>;
}

export class MemoryAuthFailures implements AuthFailures {
  readonly kind = 'memory';
  // Bounded: a flood from many addresses forgets the oldest, never grows without end.
  private readonly windows = new LRUCache<string, FailureCount>({ max: 10_000 });

  async record(address: string, at: number, windowMs: number): Promise<FailureCount> {
    const seen = this.windows.get(address);
    if (seen && seen.resetAt > at) {
      seen.count++;
      return { ...seen };
    }
    const fresh = { count: 1, resetAt: at + windowMs };
    this.windows.set(address, fresh);
    return { ...fresh };
  }
}
