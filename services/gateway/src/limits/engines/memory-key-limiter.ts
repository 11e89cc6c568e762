import type { MemoryCreditLedger } from '../../credits/memory-credit-ledger.js';
import type {
  BanList,
  BanPolicy,
  BatchResult,
  CreditBatch,
  Decision,
  KeyLimiter,
  KeyUsage,
  Waiting,
  WindowUsage,
} from '../key-limiter.js';
import { PENDING_BUCKET_MS, pendingUntil, settleBatch } from '../key-limiter.js';
import type { LimitPolicy, WindowRule } from '../policy.js';
import { MINUTE_MS, ruleEnd } from '../policy.js';

/** Where a key's own state lives: its id, or for a key of a customer under the customer (as in Redis). */
const ownerOf = (keyId: string, customerId: string | undefined): string =>
  customerId === undefined ? keyId : `${customerId}:${keyId}`;

/**
 * A window's counter, named as the Redis limiter names its key: a customer's windows under the
 * customer (`<customer>:c:m`), which all its keys count against; a calendar window of a key of a
 * customer with its period's start, so a new period (or a new billing setting) starts a new one.
 */
function counterKey(keyId: string, customerId: string | undefined, rule: WindowRule, now: number): string {
  if (customerId === undefined) return `${keyId}:${rule.suffix}`;
  const owner = rule.scope === 'customer' ? `${customerId}:c` : `${customerId}:${keyId}`;
  const name = `${owner}:${rule.suffix}`;
  return rule.kind === 'calendar' ? `${name}:${rule.calendar.start(rule.name, now)}` : name;
}

interface Counter {
  count: number;
  expiresAt: number;
  /**
   * Sliding windows: count by bucket index. Pending refusals: count by the PENDING_BUCKET_MS step
   * until which they count toward a ban.
   */
  buckets?: Map<number, number>;
}

/** What a request reads of its credit balance (MemoryCreditLedger.state). */
type CreditState = ReturnType<MemoryCreditLedger['state']>;

/** readWindows' windows: each one's rule, counter name, counter (undefined: none; take sets a new one) and count before. */
interface Windows {
  rules: readonly WindowRule[];
  keys: readonly string[];
  counters: Array<Counter | undefined>;
  used: number[];
}

/** What decide and ban read of the key's ban: whose it is, the ban in force (undefined: none), shadow mode. */
interface BanState {
  keyId: string;
  owner: string;
  held: Counter | undefined;
  /** A shadow policy's refusals count toward no ban (the script's threshold -1). */
  shadow: boolean;
}

/** decide's decision, as the script's: the outcome letter, what ban and creditsWrite then write. */
interface Decided {
  outcome: 'A' | 'L' | 'B' | 'C';
  /** The units admitted (0: none). */
  taken: number;
  /** Ms left of a ban in force before the request. */
  banTtl: number;
  /** 1 when this request started a ban, else 0. */
  startedAt: number;
  /** The refusals that count toward a ban (passed steps dropped), read when this refusal counts. */
  pending?: Counter;
  /** The step this refusal counts until, with pending. */
  added?: number;
  /** What a request refused for credits announces (credits.exhausted), once. */
  exhausted?: CreditBatch['exhausted'];
}

/**
 * The same decision as the Redis limit script (limit-script.ts), in one process: the embedded
 * default and the per-replica fallback while Redis is unreachable. Time comes from `now` so tests
 * drive it.
 */
export class MemoryKeyLimiter implements KeyLimiter {
  private readonly counters = new Map<string, Counter>();
  /** The keys banned (by id): when the ban ends, and whose counters hold it (ownerOf). */
  private readonly banned = new Map<string, { endsAt: number; owner: string }>();
  private lastSweep = 0;

  constructor(
    private readonly banPolicy: BanPolicy,
    private readonly now: () => number = Date.now,
    private readonly maxCounters = 200_000,
    /** The balances a policy with credits spends from; without, credits are not spent (the fallback's case). */
    private readonly credits: MemoryCreditLedger | null = null,
  ) {}

  private read(key: string, now: number): Counter | undefined {
    const c = this.counters.get(key);
    if (c && c.expiresAt <= now) {
      this.counters.delete(key);
      return undefined;
    }
    return c;
  }

  /** Expired counters are dropped lazily; a sweep bounds memory when many keys go quiet. */
  private sweep(now: number): void {
    if (this.counters.size < this.maxCounters && now - this.lastSweep < MINUTE_MS) return;
    this.lastSweep = now;
    for (const [key, c] of this.counters) if (c.expiresAt <= now) this.counters.delete(key);
    for (const [keyId, { endsAt }] of this.banned) if (endsAt <= now) this.banned.delete(keyId);
    // Still too many live keys: forget the oldest, as a bounded cache would, down to 90% so the
    // next new key does not pay for another full sweep.
    const target = Math.floor(this.maxCounters * 0.9);
    for (const key of this.counters.keys()) {
      if (this.counters.size <= target) break;
      this.counters.delete(key);
    }
  }

  consume(keyId: string, policy: LimitPolicy, cost: number, customerId?: string): Promise<Decision> {
    return new Promise((resolve) => {
      const now = this.now();
      this.sweep(now);
      const waiter: Waiting = { cost, resolve };
      settleBatch(policy, [waiter], this.limit(keyId, customerId, policy, cost, now), this.banPolicy, now);
    });
  }

  /**
   * One request decided by the limit script's steps (limit-script.ts), each a method of the same
   * name taking and handing back what the script's part does: readWindows, the credits read,
   * decide, take, ban, creditsWrite, reply. The history is counted outside it (guarded-limiter.ts).
   */
  private limit(keyId: string, customerId: string | undefined, policy: LimitPolicy, cost: number, now: number) {
    const owner = ownerOf(keyId, customerId);
    const keys = policy.windows.map((rule) => counterKey(keyId, customerId, rule, now));
    const windows = this.readWindows(keys, policy.windows, now);
    const credit = policy.credits && this.credits ? this.credits.state(customerId ?? keyId, policy.credits, now) : null;
    const before = credit?.held.balance ?? 0;
    const banState: BanState = { keyId, owner, held: this.read(`${owner}:ban`, now), shadow: policy.shadow };
    const decision = this.decide(windows, cost, banState, credit, now);
    this.take(windows, decision.taken, now);
    const banTtl = this.ban(decision, banState, now);
    const exhausted = credit ? this.creditsWrite(credit, decision.taken) : undefined;
    return this.reply(
      windows,
      decision,
      banTtl,
      credit && { credit, before, exhausted: decision.exhausted ?? exhausted },
      now,
    );
  }

  /**
   * readWindows(keys, rules, now) -> windows: each window's counter (undefined: none) and what it
   * holds before the request; a sliding window's stale buckets dropped.
   */
  private readWindows(keys: readonly string[], rules: readonly WindowRule[], now: number): Windows {
    const counters: Array<Counter | undefined> = [];
    const used: number[] = [];
    for (let w = 0; w < rules.length; w++) {
      const rule = rules[w] as WindowRule;
      const key = keys[w] as string;
      if (rule.kind === 'sliding') {
        const slid = this.slide(key, rule, now);
        counters.push(slid.counter);
        used.push(slid.used);
      } else {
        const counter = this.read(key, now);
        counters.push(counter);
        used.push(counter?.count ?? 0);
      }
    }
    return { rules, keys, counters, used };
  }

  /** A sliding window's live buckets (stale ones dropped) and their sum. */
  private slide(
    key: string,
    rule: WindowRule,
    now: number,
  ): { counter: Counter | undefined; used: number; from: number } {
    const counter = this.read(key, now);
    const from = Math.floor(now / rule.bucketMs) - rule.lengthMs / rule.bucketMs;
    let used = 0;
    if (counter?.buckets) {
      for (const [index, count] of counter.buckets) {
        if (index < from) counter.buckets.delete(index);
        else used += count;
      }
    }
    return { counter, used, from };
  }

  /** resetOf(rule, counter, now): ms until a window starts to give capacity back. */
  private resetOf(rule: WindowRule, counter: Counter | undefined, now: number): number {
    if (rule.kind === 'calendar') return ruleEnd(rule, now) - now;
    if (rule.kind === 'fixed') return counter ? counter.expiresAt - now : rule.lengthMs;
    const current = Math.floor(now / rule.bucketMs);
    let oldest = current;
    if (counter?.buckets) for (const index of counter.buckets.keys()) oldest = Math.min(oldest, index);
    return (oldest + rule.lengthMs / rule.bucketMs + 1) * rule.bucketMs - now;
  }

  /**
   * decide(windows, cost, banState, credit, now) -> decision: one request (consume decides one at a
   * time, where the script's decide takes a batch's costs), admitted while every window has room
   * for its cost (and the balance, with credits); a refusal counts toward a ban while its
   * Retry-After runs, and the one past the threshold bans. Reads the pending refusals (their
   * passed steps dropped) when this refusal counts; the credit's mark goes into `credit`.
   */
  private decide(windows: Windows, cost: number, banState: BanState, credit: CreditState | null, now: number): Decided {
    const { rules, counters, used } = windows;
    if (banState.held) return { outcome: 'B', taken: 0, banTtl: banState.held.expiresAt - now, startedAt: 0 };
    if (cost === 0 || rules.every((rule, w) => (used[w] as number) + cost <= rule.limit)) {
      // Out of credits: refused, taking nothing, and counting toward no ban.
      if (credit && cost > credit.held.balance) {
        const exhausted = this.credits?.exhaust(credit.held, credit.held.balance, cost);
        return { outcome: 'C', taken: 0, banTtl: 0, startedAt: 0, exhausted };
      }
      return { outcome: 'A', taken: cost, banTtl: 0, startedAt: 0 };
    }
    const refused: Decided = { outcome: 'L', taken: 0, banTtl: 0, startedAt: 0 };
    if (banState.shadow) return refused;
    // What this refusal is told to wait, at least (settleBatch tells it no less): the windows that
    // refused it, not one it would have filled exactly.
    let wait = this.banPolicy.minRetryAfterMs;
    rules.forEach((rule, w) => {
      if ((used[w] as number) + cost > rule.limit) wait = Math.max(wait, this.resetOf(rule, counters[w], now));
    });
    const until = pendingUntil(this.banPolicy, now, wait);
    if (until * PENDING_BUCKET_MS <= now) return refused;
    const pending = this.readPending(banState.owner, now);
    if (pending.count + 1 > this.banPolicy.threshold)
      return { ...refused, outcome: 'B', startedAt: 1, pending, added: until };
    return { ...refused, pending, added: until };
  }

  /** readPending(owner, now): the key's refusals that count toward a ban now, those whose time has passed dropped. */
  private readPending(owner: string, now: number): Counter {
    const key = `${owner}:pending`;
    let pending = this.read(key, now);
    if (!pending) {
      pending = { count: 0, expiresAt: now, buckets: new Map() };
      this.counters.set(key, pending);
    }
    for (const [until, count] of pending.buckets ?? []) {
      if (until * PENDING_BUCKET_MS > now) continue;
      pending.buckets?.delete(until);
      pending.count -= count;
    }
    return pending;
  }

  /** take(windows, taken, now): the admitted units taken from each window, a new counter given its expiry. */
  private take(windows: Windows, taken: number, now: number): void {
    if (taken === 0) return;
    windows.rules.forEach((rule, w) => {
      windows.counters[w] = this.takeFrom(windows.keys[w] as string, rule, windows.counters[w], taken, now);
    });
  }

  private takeFrom(key: string, rule: WindowRule, counter: Counter | undefined, cost: number, now: number): Counter {
    if (rule.kind === 'sliding') {
      const index = Math.floor(now / rule.bucketMs);
      const c = counter ?? { count: 0, expiresAt: 0, buckets: new Map<number, number>() };
      const buckets = c.buckets as Map<number, number>;
      buckets.set(index, (buckets.get(index) ?? 0) + cost);
      c.expiresAt = (index + 1) * rule.bucketMs + rule.lengthMs;
      this.counters.set(key, c);
      return c;
    }
    if (counter) {
      counter.count += cost;
      return counter;
    }
    const expiresAt = rule.kind === 'calendar' ? ruleEnd(rule, now) : now + rule.lengthMs;
    const fresh = { count: cost, expiresAt };
    this.counters.set(key, fresh);
    return fresh;
  }

  /**
   * ban(decision, banState, now) -> banTtl: the ban started, clearing the pending refusals, or this
   * refusal kept in them until its step. `banTtl`: the ban's ms left after the request (0: none).
   */
  private ban(decision: Decided, banState: BanState, now: number): number {
    const { pending, added } = decision;
    if (decision.startedAt > 0) {
      const { owner, keyId } = banState;
      this.counters.delete(`${owner}:pending`);
      this.counters.set(`${owner}:ban`, { count: 1, expiresAt: now + this.banPolicy.durationMs });
      this.banned.set(keyId, { endsAt: now + this.banPolicy.durationMs, owner });
      return this.banPolicy.durationMs;
    }
    if (pending && added !== undefined) {
      pending.buckets?.set(added, (pending.buckets.get(added) ?? 0) + 1);
      pending.count++;
      pending.expiresAt = Math.max(pending.expiresAt, added * PENDING_BUCKET_MS);
    }
    return decision.banTtl;
  }

  /** creditsWrite(credit, taken) -> the exhaustion a spend to 0 announces: the admitted units spent. */
  private creditsWrite(credit: CreditState, taken: number): CreditBatch['exhausted'] {
    return taken > 0 ? this.credits?.spend(credit.held, taken) : undefined;
  }

  /** reply(windows, decision, banTtl, credits, now) -> the BatchResult the Redis limiter reads from the script's reply. */
  private reply(
    windows: Windows,
    decision: Decided,
    banTtl: number,
    credits: { credit: CreditState; before: number; exhausted: CreditBatch['exhausted'] } | null,
    now: number,
  ): BatchResult {
    const { rules, counters, used } = windows;
    const { outcome } = decision;
    return {
      outcomes: outcome,
      ...(credits
        ? {
            credits: {
              before: credits.before,
              after: credits.credit.held.balance,
              refilled: credits.credit.refilled,
              ...(credits.exhausted ? { exhausted: credits.exhausted } : {}),
              ...(credits.credit.held.raisedTo > 0 ? { raisedTo: credits.credit.held.raisedTo } : {}),
            },
          }
        : {}),
      banTtlMs: banTtl,
      banStartedAt: decision.startedAt,
      used,
      resetMs: rules.map((rule, w) => this.resetOf(rule, counters[w], now)),
      buckets: rules.map((rule, w) => {
        const buckets = counters[w]?.buckets;
        if (outcome === 'A' || rule.kind !== 'sliding' || !buckets) return null;
        return [...buckets.entries()].sort(([a], [b]) => a - b).flat();
      }),
    };
  }

  async liftBan(keyId: string, customerId?: string): Promise<void> {
    const owner = ownerOf(keyId, customerId);
    this.counters.delete(`${owner}:ban`);
    this.counters.delete(`${owner}:pending`);
    this.banned.delete(keyId);
  }

  async bans(limit: number): Promise<BanList> {
    const now = this.now();
    // A ban whose counter the sweep dropped (past maxCounters) is no longer in force either.
    for (const [keyId, { owner }] of this.banned) if (!this.read(`${owner}:ban`, now)) this.banned.delete(keyId);
    const items = [...this.banned]
      .map(([keyId, { endsAt }]) => ({ keyId, endsAt }))
      .sort((a, b) => a.endsAt - b.endsAt || a.keyId.localeCompare(b.keyId));
    return { count: items.length, items: items.slice(0, limit) };
  }

  async banEndsAt(keyId: string, customerId?: string): Promise<number | null> {
    return this.read(`${ownerOf(keyId, customerId)}:ban`, this.now())?.expiresAt ?? null;
  }

  /** What a window's counter holds now, and when it starts to give capacity back. */
  private windowUsage(key: string, rule: WindowRule, now: number): WindowUsage {
    const { name, scope } = rule;
    if (rule.kind !== 'sliding') {
      const c = this.read(key, now);
      return { name, scope, used: c?.count ?? 0, resetAt: c ? c.expiresAt : null };
    }
    const { counter, used } = this.slide(key, rule, now);
    return { name, scope, used, resetAt: used > 0 ? now + this.resetOf(rule, counter, now) : null };
  }

  async usage(keyId: string, policy: LimitPolicy, customerId?: string): Promise<KeyUsage> {
    const now = this.now();
    const owner = ownerOf(keyId, customerId);
    return {
      windows: policy.windows.map((rule) => this.windowUsage(counterKey(keyId, customerId, rule, now), rule, now)),
      banEndsAt: this.read(`${owner}:ban`, now)?.expiresAt ?? null,
      refusals: this.read(`${owner}:pending`, now) ? this.readPending(owner, now).count : 0,
    };
  }

  async customerUsage(customerId: string, policy: LimitPolicy): Promise<WindowUsage[]> {
    const now = this.now();
    return policy.windows
      .filter((rule) => rule.scope === 'customer')
      .map((rule) => this.windowUsage(counterKey('', customerId, rule, now), rule, now));
  }
}
