import type { Redis, Result } from 'ioredis';
import { refillPeriod } from '../../credits/credit-terms.js';
import { creditKeys } from '../../credits/redis-credit-ledger.js';
import type { RedisClient } from '../../redis/clients.js';
import type { RedisUsageHistory } from '../../usage/redis-usage-history.js';
import { DAY_MS, type HistoryOutcome } from '../../usage/usage-history.js';
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
import { settleBatch } from '../key-limiter.js';
import type { LimitPolicy, WindowRule } from '../policy.js';
import { ruleEnd } from '../policy.js';
import { CallTimeouts } from './call-timeouts.js';
import { LIMIT_SCRIPT, USAGE_SCRIPT } from './limit-script.js';
import { RedisBanIndex } from './redis-ban-index.js';

type ScriptResult = Array<string | number>;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** The key count comes first: it varies with the policy's windows. */
    gatewayLimit(numKeys: number, ...keysAndArgs: Array<string | number>): Result<ScriptResult, Context>;
    gatewayUsage(numKeys: number, ...keysAndArgs: Array<string | number>): Result<number[], Context>;
  }
}

/** Event-loop turns a batch waits for more requests before it is sent (see flush). */
const LINGER_TURNS = 2;

/**
 * How much of the command timeout a script call may take to reach Redis: the rest is for its
 * answer's way back, which must be here before the timeout answers the requests without it.
 */
const DEADLINE_SHARE = 0.8;

/** How long the tightest estimate of Redis's clock is kept before a newer one replaces it. */
const CLOCK_SAMPLE_MS = 10_000;

/** A limit-script call that reached Redis past its deadline: it did nothing (LIMIT_SCRIPT, DEADLINE). */
class LateCallError extends Error {
  constructor() {
    super('Limit script call reached Redis past its deadline; it did nothing');
    this.name = 'LateCallError';
  }
}

/** A limit-script call that ran, answered after its requests were answered without it. */
export interface UnansweredCall {
  /** Whose balance and hours: the key's customer, or the key standing for itself. */
  owner: string;
  /** The requests it decided, each taken back out of the history. */
  decisions: number;
  /** The credits its admissions spent, to give back (0: none, or the policy spends none). */
  credits: number;
  /** The call's `now`: the hour its counts and spending were in. */
  at: number;
}

interface Waiter extends Waiting {
  reject(err: unknown): void;
}

interface Batch {
  policy: LimitPolicy;
  /** The key's customer (set by the batch's first request, as the policy). */
  customerId: string | undefined;
  waiters: Waiter[];
}

/**
 * Whether a window is counted in a usage-history day hash: with the history kept, a day window
 * whose day is the UTC day (the hash's). A customer's local day (23, 24 or 25 hours) is not.
 */
const isHistoryDay = (rule: WindowRule, history: boolean): boolean =>
  history && rule.kind === 'calendar' && rule.name === 'day' && rule.calendar.utcDay;

/**
 * The script's four arguments for a window; a calendar window's end moves with the clock (and
 * the calendar: a customer's billing day and month). `history`: the key's usage history is kept,
 * so a UTC day window is counted in the day's history hash (kind `h`) rather than a key of its own.
 */
function windowArgs(rule: WindowRule, now: number, history: boolean): [string, number, number, number] {
  if (rule.kind === 'calendar') {
    return [isHistoryDay(rule, history) ? 'h' : 'c', rule.limit, ruleEnd(rule, now), 0];
  }
  if (rule.kind === 'sliding') return ['s', rule.limit, rule.bucketMs, rule.lengthMs / rule.bucketMs];
  return ['f', rule.limit, rule.lengthMs, 0];
}

/**
 * The shared limiter. Requests that arrive within 1 + LINGER_TURNS turns of the event loop are decided
 * together: one script call per key, all of them sent in one write. And while a key's call is
 * out, requests for that key wait and go together as its next call, sent the moment the answer
 * is back: under load a Redis round trip serves every request that arrived during the previous
 * one, so the script calls per request fall as the load rises, where a call per turn would rise
 * with it. An idle key waits for nothing.
 */
export class RedisKeyLimiter implements KeyLimiter {
  private readonly ban: BanPolicy;
  /** Requests not yet sent, by key. */
  private pending = new Map<string, Batch>();
  /** Keys whose script call is out, each with its call's token; their pending batch goes when it is back. */
  private readonly inFlight = new Map<string, object>();
  /** Told of each call that ran but was answered too late to be used (unanswered): refunds, the log. */
  private onUnanswered: ((call: UnansweredCall) => void) | null = null;
  private flushScheduled = false;
  private lingered = 0;
  /** Whether the script connection's socket is corked until the next tick (corkForThisTick). */
  private corked = false;
  /** Times the script calls, one timer for all (undefined: no command timeout, no timer). */
  private readonly timeouts: CallTimeouts | undefined;
  private readonly banIndex: RedisBanIndex;
  /**
   * Redis's clock less this process's (ms), an upper bound: a reply's Redis time less when its call
   * was sent. The lowest of the last CLOCK_SAMPLE_MS is the closest; null until the first reply.
   */
  private clockOffset: { ms: number; at: number } | null = null;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    ban: BanPolicy,
    private readonly now: () => number = Date.now,
    /** Where the script also counts each batch, per hour; null keeps no history. */
    private readonly history: RedisUsageHistory | null = null,
    /**
     * The Redis command timeout (REDIS_COMMAND_TIMEOUT_MS): this limiter times its own calls by it
     * (then the guarded limiter answers without the call), and a call reaching Redis later must not
     * count (LIMIT_SCRIPT's DEADLINE). `redis` should then have no timeout of its own (the
     * limiter's connection, redis/clients.ts): ioredis drops a reply that comes back after its
     * timeout, and the limiter has to see it to take back what the call counted (unanswered).
     * Undefined: no deadline and no timer.
     */
    private readonly commandTimeoutMs?: number,
    /**
     * The connection the limit script goes on: without a timeout of its own (see commandTimeoutMs),
     * so only the script, timed here; every other command (bans, usage reads) keeps `redis`'s.
     */
    private readonly scriptRedis: RedisClient = redis,
  ) {
    this.ban = { ...ban };
    this.banIndex = new RedisBanIndex(redis, `${prefix}bans`, now);
    this.timeouts = commandTimeoutMs === undefined ? undefined : new CallTimeouts(commandTimeoutMs);
    if (typeof (scriptRedis as Partial<Redis>).gatewayLimit !== 'function') {
      scriptRedis.defineCommand('gatewayLimit', { lua: LIMIT_SCRIPT });
    }
    if (typeof (redis as Partial<Redis>).gatewayUsage !== 'function') {
      redis.defineCommand('gatewayUsage', { lua: USAGE_SCRIPT });
    }
  }

  /**
   * Key names share a hash tag so the script's keys sit in one Redis Cluster slot: the window's
   * counter (`m`, `d`, …; see policy.ts), then ban and pending (the refusals that count toward a
   * ban; a name of its own, as earlier versions' strike counter was a string). A key without a
   * customer tags its own id (`<prefix>{<key>}:m`, as before customers: its counters carry on);
   * a key of a customer its customer's (`<prefix>{<customer>}:<key>:m`), so the script reaches
   * the key's and the customer's counters (`<prefix>{<customer>}:c:m`) in one slot.
   */
  keyName(keyId: string, suffix: string, customerId?: string): string {
    if (customerId === undefined) return `${this.prefix}{${keyId}}:${suffix}`;
    return `${this.prefix}{${customerId}}:${keyId}:${suffix}`;
  }

  /**
   * A window's Redis key: its own, or for a UTC day with the history kept, the day's history hash
   * (the key's, or for a customer's window the customer's). A calendar window of a key of a
   * customer names its period's start (minutes since the epoch): a new period is a new counter
   * whatever a replica's clock or an earlier billing setting made the old one's expiry.
   */
  private windowKey(keyId: string, customerId: string | undefined, rule: WindowRule, now: number): string {
    const shared = rule.scope === 'customer' && customerId !== undefined;
    if (this.history && isHistoryDay(rule, true)) {
      const day = Math.floor(now / DAY_MS);
      return shared ? this.history.dayKey(customerId, day) : this.history.dayKey(keyId, day, customerId);
    }
    if (customerId === undefined) return this.keyName(keyId, rule.suffix);
    const name = this.keyName(shared ? 'c' : keyId, rule.suffix, customerId);
    return rule.kind === 'calendar' ? `${name}:${rule.calendar.start(rule.name, now) / 60_000}` : name;
  }

  /**
   * Who is told of a call that ran while its requests were answered without it (its reply came
   * after the command timeout), once its counts are taken back: the deps refund the credits it
   * spent (CreditRefunds, built after the limiter) and log it.
   */
  whenUnanswered(listener: (call: UnansweredCall) => void): void {
    this.onUnanswered = listener;
  }

  consume(keyId: string, policy: LimitPolicy, cost: number, customerId?: string): Promise<Decision> {
    return new Promise<Decision>((resolve, reject) => {
      const batch = this.pending.get(keyId);
      // The first request of a batch sets its policy: a plan change applies from the next batch.
      if (batch) batch.waiters.push({ cost, resolve, reject });
      else this.pending.set(keyId, { policy, customerId, waiters: [{ cost, resolve, reject }] });
      if (!this.flushScheduled && !this.inFlight.has(keyId)) {
        this.flushScheduled = true;
        // After this turn's I/O callbacks: every request read in this turn joins the batch.
        setImmediate(this.flush);
      }
    });
  }

  private readonly flush = (): void => {
    // LINGER_TURNS more turns before sending: the requests read in those polls join the batch.
    // Measured at saturation: script calls per request 0.138 (none) -> 0.100 (one)
    // -> 0.075 (two), +4% and +8% req/s; an idle process passes a turn in microseconds.
    if (this.lingered < LINGER_TURNS) {
      this.lingered++;
      setImmediate(this.flush);
      return;
    }
    this.lingered = 0;
    this.flushScheduled = false;
    for (const [keyId, batch] of this.pending) {
      if (this.inFlight.has(keyId)) continue;
      this.pending.delete(keyId);
      this.decide(keyId, batch);
    }
  };

  /**
   * Every script call this tick sends goes in one write: the flush's calls, and the next calls of
   * keys whose replies came in one read (sendNext). Each would otherwise be a syscall of its own,
   * and with many keys active a flush holds about one key per request (a CPU profile over 100,000
   * keys: one script call per request, and its socket write 13 % of the busy time). Uncorked on
   * the next tick, after the promise callbacks that run sendNext. A Cluster client has no one
   * socket to cork, and sends each script call on its own (redis/clients.ts says why).
   */
  private corkForThisTick(): void {
    if (this.corked || this.scriptRedis.isCluster) return;
    const socket = (this.scriptRedis as Redis).stream;
    if (!socket) return;
    socket.cork();
    this.corked = true;
    process.nextTick(() => {
      this.corked = false;
      socket.uncork();
    });
  }

  private decide(keyId: string, batch: Batch): void {
    const { policy, customerId, waiters } = batch;
    const now = this.now();
    const rules = policy.windows;
    const keysAndArgs: Array<string | number> = [];
    for (const rule of rules) keysAndArgs.push(this.windowKey(keyId, customerId, rule, now));
    keysAndArgs.push(this.keyName(keyId, 'ban', customerId), this.keyName(keyId, 'pending', customerId));
    let historyHour = '';
    let historyExpireAt = 0;
    if (this.history) {
      const shift = policy.hourShiftMs;
      const [key, hour, expireAt] = this.history.scriptArgs(keyId, now, customerId, shift);
      keysAndArgs.push(key);
      // The customer's hour: the same hour and expiry, in the customer's own day hash.
      if (customerId !== undefined) keysAndArgs.push(this.history.scriptArgs(customerId, now, undefined, shift)[0]);
      historyHour = hour;
      historyExpireAt = expireAt;
    }
    const credits = policy.credits ? refillPeriod(policy.credits, now) : undefined;
    if (policy.credits) keysAndArgs.push(...creditKeys(this.prefix, customerId ?? keyId));
    const numKeys = keysAndArgs.length;
    keysAndArgs.push(
      rules.length,
      now,
      policy.shadow ? -1 : this.ban.threshold,
      this.ban.windowMs,
      this.ban.durationMs,
      this.ban.graceMs,
      this.ban.minRetryAfterMs,
      historyHour,
      historyExpireAt,
    );
    for (const rule of rules) keysAndArgs.push(...windowArgs(rule, now, this.history !== null));
    for (const waiter of waiters) keysAndArgs.push(waiter.cost);
    // The script takes these three off the end (limit-script.ts MAIN).
    if (policy.credits) keysAndArgs.push(policy.credits.refill?.amount ?? 0, credits?.name ?? '', 'credits');
    // The real clock, not `now` (a test's clock may be anywhere): the deadline is about waiting.
    const sentAt = Date.now();
    keysAndArgs.push(this.deadline(sentAt));
    const token = {};
    this.inFlight.set(keyId, token);
    this.corkForThisTick();
    let call: Promise<ScriptResult>;
    try {
      call = this.scriptRedis.gatewayLimit(numKeys, ...keysAndArgs);
    } catch (err) {
      // A call that throws instead of rejecting must not leave the key marked in flight forever.
      call = Promise.reject(err);
    }
    // Timed here, not by ioredis (which would drop a late reply unseen).
    let timedOut = false;
    const timing = this.timeouts?.start(() => {
      timedOut = true;
      // ioredis's own message, so the error is told apart as it was (redis/errors.ts).
      this.failCall(keyId, token, waiters, new Error('Command timed out'));
    });
    call.then(
      async (reply) => {
        timing?.settle();
        if (timedOut) return this.unanswered(keyId, batch, reply, now, sentAt);
        // resolve() is a no-op once settled, so the catch-all below cannot double-answer.
        try {
          const late = reply[0] === 'late';
          this.observeClock(Number(reply[reply.length - 1]), sentAt, late);
          if (late) throw new LateCallError();
          const result = batchResult(reply, rules.length, policy.credits !== undefined);
          if (result.banStartedAt > 0)
            await this.banIndex.started(keyId, this.keyName(keyId, 'ban', customerId), now + result.banTtlMs);
          else this.banIndex.retry();
          // At the moment the call was made: the script's resets count from it (a calendar window
          // then ends exactly at its period's end).
          settleBatch(policy, waiters, result, this.ban, now);
        } catch (err) {
          for (const waiter of waiters) waiter.reject(err);
        }
        this.sendNext(keyId);
      },
      (err: unknown) => {
        timing?.settle();
        if (!timedOut) this.failCall(keyId, token, waiters, err);
      },
    );
  }

  /**
   * A call failed or timed out. Those who waited behind it fail with it, at once: they would
   * otherwise wait out a second timeout before the failure mode answers them.
   */
  private failCall(keyId: string, token: object, waiters: readonly Waiter[], err: unknown): void {
    if (this.inFlight.get(keyId) === token) {
      const behind = this.pending.get(keyId);
      this.pending.delete(keyId);
      this.inFlight.delete(keyId);
      for (const waiter of behind?.waiters ?? []) waiter.reject(err);
    }
    for (const waiter of waiters) waiter.reject(err);
  }

  /**
   * A call's reply that came back after its requests were answered without it (the guarded
   * limiter's failure mode: served by the fallback, which counted them in the spool, or refused
   * with 503). One that reached Redis past its deadline did nothing. One that ran before it (Redis
   * stopped after running it, or the reply waited on the way back) counted decisions no client saw:
   * they are taken back out of the history, and the credits its admissions spent go back, so the
   * history holds the answers clients got, once, and no one pays for a 503. Its windows keep what it
   * took (limits only stricter for the rest of the window) and a ban it started stays in force.
   */
  private async unanswered(keyId: string, batch: Batch, reply: ScriptResult, now: number, sentAt: number) {
    const late = reply[0] === 'late';
    this.observeClock(Number(reply[reply.length - 1]), sentAt, late);
    if (late) return;
    const { policy, customerId, waiters } = batch;
    const result = batchResult(reply, policy.windows.length, policy.credits !== undefined);
    let spent = 0;
    waiters.forEach((waiter, i) => {
      const outcome = historyOutcome(result.outcomes[i], waiter.cost);
      const units = outcome === 'admitted' ? waiter.cost : 0;
      spent += units;
      // Where the script counted it: the key's hour (in its customer's slot) and the customer's.
      this.history?.uncount(keyId, outcome, units, now, policy.hourShiftMs, customerId);
      if (customerId !== undefined) this.history?.uncount(customerId, outcome, units, now, policy.hourShiftMs);
    });
    this.onUnanswered?.({
      owner: customerId ?? keyId,
      decisions: waiters.length,
      credits: policy.credits ? spent : 0,
      at: now,
    });
    if (result.banStartedAt > 0)
      await this.banIndex.started(keyId, this.keyName(keyId, 'ban', customerId), now + result.banTtlMs);
  }

  /** Redis's time past which a call sent at `sentAt` does nothing (0: none, the clocks not known yet). */
  private deadline(sentAt: number): number {
    if (this.commandTimeoutMs === undefined || !this.clockOffset) return 0;
    return Math.floor(sentAt + this.clockOffset.ms + this.commandTimeoutMs * DEADLINE_SHARE);
  }

  /**
   * A reply's Redis time: the offset it bounds replaces a looser or older one. A 'late' reply back
   * within the timeout proves the estimate wrong (a clock stepped): it is taken whatever it says.
   */
  private observeClock(redisNow: number, sentAt: number, late: boolean): void {
    if (!Number.isFinite(redisNow)) return;
    const at = Date.now();
    const ms = redisNow - sentAt;
    const known = this.clockOffset;
    const wrong = late && this.commandTimeoutMs !== undefined && at - sentAt < this.commandTimeoutMs;
    if (!known || ms <= known.ms || at - known.at > CLOCK_SAMPLE_MS || wrong) this.clockOffset = { ms, at };
  }

  /** The key's call is back: what arrived meanwhile goes now, as one call. */
  private sendNext(keyId: string): void {
    this.inFlight.delete(keyId);
    const next = this.pending.get(keyId);
    if (!next) return;
    this.pending.delete(keyId);
    this.decide(keyId, next);
  }

  async liftBan(keyId: string, customerId?: string): Promise<void> {
    await this.redis.del(this.keyName(keyId, 'ban', customerId), this.keyName(keyId, 'pending', customerId));
    await this.banIndex.lifted(keyId);
  }

  async bans(limit: number): Promise<BanList> {
    return this.banIndex.list(limit);
  }

  async banEndsAt(keyId: string, customerId?: string): Promise<number | null> {
    // The end the ban's key holds (see BAN_LEFT), so every read names the same instant.
    const name = this.keyName(keyId, 'ban', customerId);
    const ends = Number(await this.redis.get(name));
    if (ends > this.now()) return ends;
    const ttl = await this.redis.pttl(name);
    return ttl > 0 ? this.now() + ttl : null;
  }

  /** The windows' keys and the usage script's arguments for them, read at `now`. */
  private readWindows(
    keyId: string,
    customerId: string | undefined,
    rules: readonly WindowRule[],
    now: number,
    ban: boolean,
  ): Promise<number[]> {
    const keysAndArgs: Array<string | number> = rules.map((rule) => this.windowKey(keyId, customerId, rule, now));
    if (ban) keysAndArgs.push(this.keyName(keyId, 'ban', customerId), this.keyName(keyId, 'pending', customerId));
    const numKeys = keysAndArgs.length;
    keysAndArgs.push(rules.length, now);
    for (const rule of rules) {
      const [kind, , a, b] = windowArgs(rule, now, this.history !== null);
      keysAndArgs.push(kind, a, b);
    }
    return this.redis.gatewayUsage(numKeys, ...keysAndArgs);
  }

  /** What the usage script read of each window, with its reset (null while it holds nothing). */
  private windowUsage(rules: readonly WindowRule[], reply: number[], now: number, read: number): WindowUsage[] {
    return rules.map((rule, w) => {
      const used = Number(reply[2 * w]);
      const reset = Number(reply[2 * w + 1]);
      if (used === 0 || reset <= 0) return { name: rule.name, scope: rule.scope, used, resetAt: null };
      // A calendar window ends at its period's end, to the millisecond.
      const resetAt = rule.kind === 'calendar' ? ruleEnd(rule, now) : read + reset;
      return { name: rule.name, scope: rule.scope, used, resetAt };
    });
  }

  async usage(keyId: string, policy: LimitPolicy, customerId?: string): Promise<KeyUsage> {
    // One script: every key read at one instant, in one round trip (and one Cluster slot).
    const now = this.now();
    const rules = policy.windows;
    const reply = await this.readWindows(keyId, customerId, rules, now, true);
    const read = this.now();
    const windows = this.windowUsage(rules, reply, now, read);
    const banTtl = Number(reply[2 * rules.length]);
    return {
      windows,
      // Ms left at the script's `now`: now + that is the end the ban's key holds.
      banEndsAt: banTtl > 0 ? now + banTtl : null,
      refusals: Number(reply[2 * rules.length + 1]),
    };
  }

  async customerUsage(customerId: string, policy: LimitPolicy): Promise<WindowUsage[]> {
    const now = this.now();
    const rules = policy.windows.filter((rule) => rule.scope === 'customer');
    if (rules.length === 0) return [];
    // Any key id: a customer's windows are named by the customer alone.
    const reply = await this.readWindows('', customerId, rules, now, false);
    return this.windowUsage(rules, reply, now, this.now());
  }
}

/** A request's outcome letter in the script's reply as the history counts it (LIMIT_SCRIPT's HISTORY). */
function historyOutcome(letter: string | undefined, cost: number): HistoryOutcome {
  if (letter === 'C') return 'outOfCredits';
  if (cost === 0) return 'forbidden';
  return letter === 'A' ? 'admitted' : letter === 'B' ? 'banned' : 'limited';
}

/** The script's reply as a BatchResult (see LIMIT_SCRIPT for its layout). */
function batchResult(reply: ScriptResult, windows: number, credits: boolean): BatchResult {
  const used: number[] = [];
  const resetMs: number[] = [];
  const buckets: Array<number[] | null> = [];
  for (let w = 0; w < windows; w++) {
    used.push(Number(reply[3 + w]));
    resetMs.push(Number(reply[3 + windows + w]));
    const text = String(reply[3 + 2 * windows + w] ?? '');
    buckets.push(text === '' ? null : text.split(/[:,]/).map(Number));
  }
  const tail = 3 + 3 * windows;
  return {
    outcomes: String(reply[0]),
    ...(credits ? { credits: creditBatch(reply, tail) } : {}),
    banTtlMs: Number(reply[1]),
    banStartedAt: Number(reply[2]),
    used,
    resetMs,
    buckets,
  };
}

/** The reply's credit tail: before, after, refilled, the exhaustion this call announces (-1: none), `m`. */
function creditBatch(reply: ScriptResult, tail: number): CreditBatch {
  const batch: CreditBatch = {
    before: Number(reply[tail]),
    after: Number(reply[tail + 1]),
    refilled: Number(reply[tail + 2]),
  };
  const raisedTo = Number(reply[tail + 5]);
  if (raisedTo > 0) batch.raisedTo = raisedTo;
  const balance = Number(reply[tail + 3]);
  if (balance >= 0) {
    const cost = Number(reply[tail + 4]);
    batch.exhausted = cost > 0 ? { balance, cost } : { balance };
  }
  return batch;
}
