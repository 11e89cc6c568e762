import type { CreditBatch } from '../credits/credit-ledger.js';
import { refillPeriod } from '../credits/credit-terms.js';
import type { LimitPolicy, WindowName, WindowRule, WindowScope } from './policy.js';
import { freshResetMs, windowSeconds } from './policy.js';

// What a call did to a balance is the ledger's notion; the engines and webhooks name it here.
export type { CreditBatch };

/** One window's state after a decision; `resetAt` is epoch milliseconds. */
export interface WindowState {
  name: WindowName | 'anonymous';
  /** The key's own window, or its customer's (shared by all its keys; named `customer-…` in headers). */
  scope: WindowScope;
  limit: number;
  remaining: number;
  windowSeconds: number;
  /** When capacity starts to come back: the window's reset, or a sliding window's oldest bucket leaving. */
  resetAt: number;
}

/**
 * `credits`, on the first decision of a limiter call on a credit balance: what the call did to it
 * (for the credit webhooks: one report per call, whatever its first request's outcome).
 */
export type Decision = (
  | { outcome: 'admitted'; windows: WindowState[] }
  | {
      outcome: 'limited';
      windows: WindowState[];
      /** What the client is told to wait: never less than the ban policy's shortest Retry-After. */
      retryAfterMs: number;
      /** When the refusing window has room for the request (ms from now), which may be sooner. */
      roomInMs: number;
      /** The window the request waits longest for: the one that refused it. */
      refusedBy: WindowRule;
    }
  | {
      /** The windows had room, the credit balance had not: nothing was taken. */
      outcome: 'exhausted';
      windows: WindowState[];
      /** What the balance held for this request. */
      balance: number;
      /** Until the next refill, when one is due that covers the request's cost; else null. */
      retryAfterMs: number | null;
    }
  | {
      outcome: 'banned';
      windows: WindowState[];
      banEndsAt: number;
      /** Set on the one decision that started the ban: how many refusals it took. */
      started?: { refusals: number };
    }
) & { credits?: CreditBatch };

/**
 * Ban policy. A client that honours Retry-After sends nothing while the Retry-After of its last
 * 429 runs, so at any moment it holds at most one refusal whose Retry-After has not run out; a
 * client that keeps sending into its refusals piles them up. So a refusal counts toward a ban while
 * its Retry-After runs (at most `windowMs`, less `graceMs`), and the refusal that makes more than
 * `threshold` of them count at once bans the key for `durationMs`: however their refusals spread in
 * time, `threshold` clients that each honour Retry-After are never banned.
 */
export interface BanPolicy {
  /** The most refusals that may count at once: the size of a polite fleet that is never banned. */
  threshold: number;
  /** The longest a refusal counts, however long its Retry-After. */
  windowMs: number;
  durationMs: number;
  /**
   * How much of each Retry-After does not count: a replica's clock may run ahead of the one that
   * refused, and a client's timer may fire a little early.
   */
  graceMs: number;
  /**
   * The shortest Retry-After a refusal gives. One client refused r times a second while each
   * Retry-After is R seconds holds about r × R refusals at once, as r × R polite clients would:
   * only a Retry-After long enough lets that pile pass `threshold` for a client that retries fast.
   */
  minRetryAfterMs: number;
}

/**
 * A refusal counts until the end of the PENDING_BUCKET_MS-long step its Retry-After (capped at the
 * ban window, less the grace) ends in, rounded down: limiters keep one count per step, so a key
 * refused without pause holds at most windowMs / PENDING_BUCKET_MS counts, whatever the threshold.
 */
export const PENDING_BUCKET_MS = 100;

/**
 * The step, as an index of PENDING_BUCKET_MS-long steps since the epoch, until which a refusal made
 * at `now` that is told to wait `waitMs` counts toward a ban; it counts while index × step > now.
 */
export function pendingUntil(ban: BanPolicy, now: number, waitMs: number): number {
  return Math.floor((now + Math.min(waitMs, ban.windowMs) - ban.graceMs) / PENDING_BUCKET_MS);
}

/** One window's count as the limiter holds it; `resetAt` (epoch ms) is null while it holds nothing. */
export interface WindowUsage {
  name: WindowName;
  scope: WindowScope;
  used: number;
  resetAt: number | null;
}

/** A key's live limiter state, for support to answer "why do I get 429?". */
export interface KeyUsage {
  /** The policy's windows, in its order. */
  windows: WindowUsage[];
  /** When the key's ban ends (epoch ms), or null when not banned. */
  banEndsAt: number | null;
  /** Refusals counted toward a ban right now: those whose Retry-After has not run out. */
  refusals: number;
}

/**
 * Decides whether a key may make one more request; shared by all replicas when backed by Redis.
 * `customerId`: the key's customer, for a key that has one. Its `customer` windows are kept under
 * the customer (every key of it counts against them), and under Redis Cluster everything of the
 * key sits in the customer's slot; the key's ban and refusals stay the key's own.
 */
export interface KeyLimiter {
  /**
   * Takes `cost` units from every window of the policy, or refuses and takes nothing when any
   * window has less left than that.
   */
  consume(keyId: string, policy: LimitPolicy, cost: number, customerId?: string): Promise<Decision>;
  /** Lifts a ban and forgets the key's refusals. */
  liftBan(keyId: string, customerId?: string): Promise<void>;
  /** When the key's ban ends (epoch ms), or null when not banned. */
  banEndsAt(keyId: string, customerId?: string): Promise<number | null>;
  /** Reads the policy's windows, the ban and the refusals; never counts as a request. */
  usage(keyId: string, policy: LimitPolicy, customerId?: string): Promise<KeyUsage>;
  /** Reads a customer's shared windows (the `customer` windows of `policy`); never counts. */
  customerUsage(customerId: string, policy: LimitPolicy): Promise<WindowUsage[]>;
  /** The keys banned now, however many: their number, and the `limit` whose bans end first. */
  bans(limit: number): Promise<BanList>;
}

/**
 * The bans in force, from the limiter's own index of them (a key is entered when its ban starts
 * and leaves when it ends or is lifted), so counting them reads no key store.
 */
export interface BanList {
  count: number;
  /** Soonest end first. */
  items: Array<{ keyId: string; endsAt: number }>;
}

/**
 * What a limiter decided for a batch of requests of one key, in order, as the Redis script
 * returns it and the memory limiter computes it; `settleBatch` turns it into decisions.
 */
export interface BatchResult {
  /** One letter per request: A admitted, L limited, B banned, C out of credits. */
  outcomes: string;
  /**
   * For a policy with credits: the balance before the batch (a refill due applied), after it, and
   * what the refill added (0 when none was due).
   */
  credits?: CreditBatch;
  /** The ban's time left (ms) when any request was banned, else 0. */
  banTtlMs: number;
  /** 1 + the index of the refusal that started a ban, or 0. */
  banStartedAt: number;
  /** Per window: what it held before the batch. */
  used: number[];
  /** Per window: ms from now until capacity starts to come back, after the batch. */
  resetMs: number[];
  /**
   * Per sliding window, when the batch had a refusal: its buckets after the batch, oldest first,
   * as [index, count, index, count, …]; else null.
   */
  buckets: Array<number[] | null>;
}

/** How long a request out of credits waits for the next refill, when that refill covers its cost. */
function refillWait(policy: LimitPolicy, cost: number, now: number): number | null {
  const rule = policy.credits;
  const period = rule ? refillPeriod(rule, now) : null;
  if (!period || (rule?.refill?.amount ?? 0) < cost) return null;
  return period.nextAt - now;
}

/** The windows as a request sees them once `used` units are taken from each. */
function windowStates(
  policy: LimitPolicy,
  used: readonly number[],
  resetMs: readonly number[],
  now: number,
): WindowState[] {
  const states: WindowState[] = [];
  const rules = policy.windows;
  for (let w = 0; w < rules.length; w++) {
    const rule = rules[w] as WindowRule;
    states.push({
      name: rule.name,
      scope: rule.scope,
      limit: rule.limit,
      remaining: Math.max(0, rule.limit - (used[w] as number)),
      windowSeconds: windowSeconds(rule, now),
      resetAt: now + (resetMs[w] as number),
    });
  }
  return states;
}

/**
 * How long a refused request of `cost` must wait until every window has room for it: a fixed or
 * calendar window's reset; in a sliding window, until enough of its oldest buckets have left. A
 * cost above a window's limit never fits; it is told to wait a whole window. With it, the window
 * that makes it wait longest.
 */
function waitFor(
  policy: LimitPolicy,
  result: BatchResult,
  usedAfter: readonly number[],
  cost: number,
  now: number,
): { retryAfterMs: number; refusedBy: WindowRule } {
  let wait = 0;
  const rules = policy.windows;
  let refusedBy = rules[0] as WindowRule;
  for (let w = 0; w < rules.length; w++) {
    const rule = rules[w] as WindowRule;
    const used = usedAfter[w] as number;
    if (used + cost <= rule.limit) continue;
    let until = result.resetMs[w] as number;
    const buckets = result.buckets[w];
    if (cost > rule.limit) until = Math.max(until, rule.lengthMs);
    else if (rule.kind === 'sliding' && buckets) {
      const perWindow = rule.lengthMs / rule.bucketMs;
      let freed = 0;
      for (let i = 0; i < buckets.length; i += 2) {
        freed += buckets[i + 1] as number;
        if (used - freed + cost <= rule.limit) {
          until = ((buckets[i] as number) + perWindow + 1) * rule.bucketMs - now;
          break;
        }
      }
    }
    if (until >= wait) {
      wait = until;
      refusedBy = rule;
    }
  }
  return { retryAfterMs: Math.max(wait, 1), refusedBy };
}

export interface Waiting {
  cost: number;
  resolve(decision: Decision): void;
}

/**
 * Answers each request of a batch from the limiter's result: what each window held once the
 * requests before it (and it, if admitted) were taken, when to retry (never sooner than the ban
 * policy's shortest Retry-After: the limiters count each refusal toward a ban for what it is told
 * here), when a ban ends.
 */
export function settleBatch(
  policy: LimitPolicy,
  waiters: readonly Waiting[],
  result: BatchResult,
  ban: BanPolicy,
  now: number,
): void {
  const used = result.used.slice();
  const final = result.used.slice();
  let spent = 0;
  // The call's report on its credit balance goes with its first decision alone.
  const withCredits = (decision: Decision, i: number): Decision =>
    i === 0 && result.credits ? Object.assign(decision, { credits: result.credits }) : decision;
  for (let i = 0; i < waiters.length; i++) {
    if (result.outcomes[i] !== 'A') continue;
    const cost = (waiters[i] as Waiting).cost;
    for (let w = 0; w < final.length; w++) final[w] = (final[w] as number) + cost;
  }
  for (let i = 0; i < waiters.length; i++) {
    const waiter = waiters[i] as Waiting;
    const outcome = result.outcomes[i];
    if (outcome === 'A') {
      spent += waiter.cost;
      for (let w = 0; w < used.length; w++) used[w] = (used[w] as number) + waiter.cost;
      const windows = windowStates(policy, used, result.resetMs, now);
      waiter.resolve(withCredits({ outcome: 'admitted', windows }, i));
      continue;
    }
    const windows = windowStates(policy, used, result.resetMs, now);
    if (outcome === 'C') {
      const balance = (result.credits?.before ?? 0) - spent;
      const retryAfterMs = refillWait(policy, waiter.cost, now);
      waiter.resolve(withCredits({ outcome: 'exhausted', windows, balance, retryAfterMs }, i));
    } else if (outcome === 'L') {
      const { retryAfterMs, refusedBy } = waitFor(policy, result, final, waiter.cost, now);
      waiter.resolve(
        withCredits(
          {
            outcome: 'limited',
            windows,
            retryAfterMs: Math.max(retryAfterMs, ban.minRetryAfterMs),
            roomInMs: retryAfterMs,
            refusedBy,
          },
          i,
        ),
      );
    } else {
      const started = result.banStartedAt === i + 1 ? { started: { refusals: ban.threshold + 1 } } : {};
      waiter.resolve(withCredits({ outcome: 'banned', windows, banEndsAt: now + result.banTtlMs, ...started }, i));
    }
  }
}

/** The windows of a policy as a request would see them with nothing used: for refusals taken before the limiter. */
export function emptyWindows(policy: LimitPolicy, now: number): WindowState[] {
  return windowStates(
    policy,
    policy.windows.map(() => 0),
    policy.windows.map((rule) => freshResetMs(rule, now)),
    now,
  );
}
