import type { HistoryOutcome, UsageHistory } from '../usage/usage-history.js';
import type { BanList, Decision, KeyLimiter, KeyUsage, WindowState, WindowUsage } from './key-limiter.js';
import type { LimitPolicy } from './policy.js';

export type FailureMode = 'open' | 'closed';

/**
 * Where a decision was taken: `shared` (Redis, all replicas), `memory` (the embedded limiter,
 * this process only), `local-ban` (this replica's memory of a ban), `fallback` (per replica
 * while Redis is failing).
 */
export type DecisionSource = 'shared' | 'memory' | 'local-ban' | 'fallback';

export type GuardedDecision = (Decision & { source: DecisionSource }) | { outcome: 'unavailable'; source: 'shared' };

interface KnownBan {
  endsAt: number;
  windows: WindowState[];
  /** The key's customer: its ban lives in the customer's slot (a recheck must name it). */
  customerId: string | undefined;
}

/**
 * After the shared limiter fails, requests skip it for this long and go straight to the failure
 * mode's answer, so an outage costs clients no waiting on timeouts and a recovering Redis no
 * burst of queued commands; then requests try it again.
 */
const RETRY_SHARED_AFTER_MS = 500;

export interface GuardHooks {
  /** Called on each failure of the shared limiter; `first` when it was healthy until now. */
  onPrimaryError?: (err: unknown, first: boolean) => void;
  onRecovered?: () => void;
}

/**
 * Puts a replica's knowledge of bans in front of the shared limiter (a banned key costs no
 * Redis call once this replica has seen the ban) and decides what happens when the shared
 * limiter fails: `open` uses the per-replica fallback, `closed` reports unavailable.
 */
/**
 * The limiters a GuardedLimiter stands in front of. Either the shared one (Redis, `shared`) with
 * a per-replica fallback for when it fails, or the embedded one alone (`memory`, no fallback).
 */
export type GuardedLimiters =
  | {
      kind: 'shared';
      primary: KeyLimiter;
      fallback: KeyLimiter;
      mode: FailureMode;
      hooks?: GuardHooks;
      /**
       * Where the fallback's decisions are counted while the shared history cannot be written:
       * the usage spool, replayed into the history once Redis answers (usage/usage-spool.ts).
       */
      spool?: Pick<UsageHistory, 'count'>;
    }
  | { kind: 'memory'; primary: KeyLimiter };

export class GuardedLimiter {
  private readonly knownBans = new Map<string, KnownBan>();
  private failing = false;
  private retrySharedAt = 0;
  private readonly primary: KeyLimiter;
  private readonly fallback: KeyLimiter | null;
  /** What decisions of `primary` are: shared by every replica (Redis), or this process's own (embedded). */
  private readonly primarySource: 'shared' | 'memory';
  private readonly mode: FailureMode;
  private readonly hooks: GuardHooks;
  private readonly spool: Pick<UsageHistory, 'count'> | null;

  constructor(
    limiters: GuardedLimiters,
    private readonly now: () => number,
    /**
     * The usage history. The shared limiter counts its own decisions in its script; this counts
     * the embedded limiter's and this replica's refusals of a ban it knows. Decisions of the
     * fallback (Redis failing) go to the spool instead, which writes them once Redis is back.
     */
    private readonly history: UsageHistory | null = null,
  ) {
    this.primary = limiters.primary;
    this.primarySource = limiters.kind;
    this.fallback = limiters.kind === 'shared' ? limiters.fallback : null;
    // The embedded limiter cannot fail over; its mode is never consulted.
    this.mode = limiters.kind === 'shared' ? limiters.mode : 'closed';
    this.hooks = (limiters.kind === 'shared' ? limiters.hooks : undefined) ?? {};
    this.spool = (limiters.kind === 'shared' ? limiters.spool : undefined) ?? null;
  }

  /** `customerId`: the key's customer, for a key that has one (see KeyLimiter). */
  consume(keyId: string, policy: LimitPolicy, cost: number, customerId?: string): Promise<GuardedDecision> {
    const known = this.knownBans.get(keyId);
    if (known) {
      const at = this.now();
      if (known.endsAt > at) {
        this.count(keyId, customerId, cost > 0 ? 'banned' : 'forbidden', 0, at, policy.hourShiftMs);
        return Promise.resolve({
          outcome: 'banned',
          windows: known.windows,
          banEndsAt: known.endsAt,
          source: 'local-ban',
        });
      }
      this.knownBans.delete(keyId);
    }
    if (this.failing && this.now() < this.retrySharedAt) return this.withoutShared(keyId, policy, cost, customerId);
    // A plain promise chain, not async/await: this runs once per request.
    return this.primary.consume(keyId, policy, cost, customerId).then(
      (decision) => this.fromPrimary(keyId, customerId, decision, cost, policy.hourShiftMs),
      (err) => this.afterFailure(err, keyId, policy, cost, customerId),
    );
  }

  /**
   * A decision taken outside the shared limiter's script, in the history: the key's hour, and its
   * customer's (whose hours are the sum of its keys', as the script writes them), both in the
   * hours of the policy's hourShiftMs. `limiter`: the memory limiter's own decision, whose key
   * hour is kept where the script keeps its decisions, in the customer's slot for the key, so a
   * key that later stands for itself is not billed for it again; a refusal of a ban the replica
   * already knows stays in the key's own hours, with the other counts taken outside the script.
   */
  private count(
    keyId: string,
    customerId: string | undefined,
    outcome: HistoryOutcome,
    units: number,
    at: number,
    shiftMs: number,
    limiter = false,
    into: Pick<UsageHistory, 'count'> | null = this.history,
  ) {
    if (!into) return;
    into.count(keyId, outcome, units, at, shiftMs, limiter ? customerId : undefined);
    if (customerId !== undefined) into.count(customerId, outcome, units, at, shiftMs);
  }

  /** A decision of the memory limiter (the embedded one, or the fallback) as the script would count it. */
  private countLimiter(
    into: Pick<UsageHistory, 'count'> | null,
    keyId: string,
    customerId: string | undefined,
    decision: Decision,
    cost: number,
    shiftMs: number,
  ) {
    // Out of credits is a refusal of its own (402), counted as the Redis script counts it.
    const outcome: HistoryOutcome =
      cost === 0 ? 'forbidden' : decision.outcome === 'exhausted' ? 'outOfCredits' : decision.outcome;
    this.count(keyId, customerId, outcome, outcome === 'admitted' ? cost : 0, this.now(), shiftMs, true, into);
  }

  private fromPrimary(
    keyId: string,
    customerId: string | undefined,
    decision: Decision,
    cost: number,
    shiftMs: number,
  ): GuardedDecision {
    if (this.failing) {
      this.failing = false;
      this.hooks.onRecovered?.();
    }
    if (this.primarySource === 'memory') this.countLimiter(this.history, keyId, customerId, decision, cost, shiftMs);
    if (decision.outcome === 'banned') {
      this.knownBans.set(keyId, { endsAt: decision.banEndsAt, windows: decision.windows, customerId });
    }
    // The decision is freshly made for this call, so tagging it in place is safe and saves a copy.
    return Object.assign(decision, { source: this.primarySource });
  }

  private afterFailure(
    err: unknown,
    keyId: string,
    policy: LimitPolicy,
    cost: number,
    customerId: string | undefined,
  ): Promise<GuardedDecision> {
    this.hooks.onPrimaryError?.(err, !this.failing);
    this.failing = true;
    this.retrySharedAt = this.now() + RETRY_SHARED_AFTER_MS;
    return this.withoutShared(keyId, policy, cost, customerId);
  }

  private async withoutShared(
    keyId: string,
    policy: LimitPolicy,
    cost: number,
    customerId: string | undefined,
  ): Promise<GuardedDecision> {
    if (this.mode === 'closed' || !this.fallback) return { outcome: 'unavailable', source: 'shared' };
    // Credits are money, and the balance is in Redis: a request that would spend them is refused
    // whatever the failure mode, never served past what was paid for (docs/credits.md).
    if (policy.credits && cost > 0) return { outcome: 'unavailable', source: 'shared' };
    const decision = await this.fallback.consume(keyId, policy, cost, customerId);
    this.countLimiter(this.spool, keyId, customerId, decision, cost, policy.hourShiftMs);
    return Object.assign(decision, { source: 'fallback' as const });
  }

  /** Forgets what this replica knows of a key's ban (after an admin lifted it anywhere). */
  forgetBan(keyId: string): void {
    this.knownBans.delete(keyId);
  }

  /** Forgets every ban this replica knows of; each banned key costs one Redis call to relearn. */
  forgetBans(): void {
    this.knownBans.clear();
  }

  /**
   * Asks the shared limiter about every ban this replica remembers and forgets those that ended
   * early (lifted on another replica while this one did not hear of it): one call per banned key.
   */
  async recheckBans(): Promise<void> {
    if (this.knownBans.size === 0 || this.failing) return;
    await Promise.all(
      [...this.knownBans].map(async ([keyId, { customerId }]) => {
        const endsAt = await this.primary.banEndsAt(keyId, customerId);
        const known = this.knownBans.get(keyId);
        if (!known) return;
        if (endsAt === null) this.knownBans.delete(keyId);
        else known.endsAt = endsAt;
      }),
    );
  }

  /** When the key's ban in the shared limiter ends (epoch ms), or null when it is not banned. */
  banEndsAt(keyId: string, customerId?: string): Promise<number | null> {
    return this.primary.banEndsAt(keyId, customerId);
  }

  /** The key's state in the shared limiter (the fallback's counts are per replica and partial). */
  usage(keyId: string, policy: LimitPolicy, customerId?: string): Promise<KeyUsage> {
    return this.primary.usage(keyId, policy, customerId);
  }

  /** A customer's shared windows in the shared limiter. */
  customerUsage(customerId: string, policy: LimitPolicy): Promise<WindowUsage[]> {
    return this.primary.customerUsage(customerId, policy);
  }

  /** The bans in force in the shared limiter: the fallback's are this replica's alone. */
  bans(limit: number): Promise<BanList> {
    return this.primary.bans(limit);
  }

  async liftBan(keyId: string, customerId?: string): Promise<void> {
    this.knownBans.delete(keyId);
    await Promise.all([this.primary.liftBan(keyId, customerId), this.fallback?.liftBan(keyId, customerId)]);
  }
}

/**
 * What an operator hears about the shared limiter: each failure counted, the first of an outage
 * logged with what the failure mode does meanwhile, and the recovery.
 */
export function limiterHealthLog(
  log: { error(obj: object, msg: string): void; warn(msg: string): void },
  metrics: { redisErrors: { inc(): void } },
  mode: FailureMode,
): GuardHooks {
  return {
    onPrimaryError: (err, first) => {
      metrics.redisErrors.inc();
      if (!first) return;
      log.error(
        { err },
        mode === 'open'
          ? 'Redis rate limiter failing: serving with the per-replica in-memory fallback'
          : 'Redis rate limiter failing: refusing keyed requests with 503 (RATE_LIMIT_FAILURE_MODE=closed)',
      );
    },
    onRecovered: () => log.warn('Redis rate limiter recovered: shared limits are back'),
  };
}
