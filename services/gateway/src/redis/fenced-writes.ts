import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis, Result } from 'ioredis';
import type { RedisClient } from './clients.js';
import { isRedisUnreachable } from './errors.js';

/*
 * Why writes are fenced. A command the gateway gave up on is not a command Redis dropped: in a
 * stall (a SIGSTOPped or swapping Redis, a long fork) it waits in the socket and runs when Redis
 * resumes. An admin top-up answered `503 store_unavailable` then still added its credits, and a
 * caller retrying as told added them twice; a portal sign-in link answered 503 was written anyway.
 * A fenced write cannot outlive its answer: it carries a deadline on Redis's own clock, its script
 * reads `TIME` first and does nothing once the deadline has passed, and the gateway answers a
 * failure only once the deadline has surely passed on that clock. From then on, the write can
 * never apply. What remains is the reply lost after the write did apply before its deadline (a
 * connection cut on the way back): a 503 that was done. Repeating a write under an
 * Idempotency-Key is what makes that case safe.
 *
 * The deadline is on the server's clock because only the server can check it when the command
 * finally runs; the gateway's clock may be off by anything. Each fence learns the offset afresh
 * from one round trip of TIME (through a script on the write's own key, so a Cluster asks the
 * node that will run the write, whose clock it is): TIME was read somewhere between sending and
 * receiving, so the server's time at the reply is its value plus at most the round trip. Learned
 * per write, not cached: fenced writes are the admin API's and the portal's sign-ins, a few a
 * minute, and a fresh sample needs no drift allowance, follows a failover to a master with
 * another clock at once, and doubles as a check that Redis answers at all (a stalled Redis fails
 * the sample, and the write is never sent). The local side is the monotonic clock, which no
 * wall-clock step moves. Assumed: Redis's clock does not step back by more than FENCE_MARGIN_MS
 * within a write's window (NTP slews small errors; a step back is an operator's act).
 */

/** Lua: the error reply a fenced script returns when it runs too late; its first word is the reply's code. */
const LATE = 'FENCED the write reached Redis after its deadline: nothing was done';

/**
 * Lua for a script of its own: `fenceRefusal(deadline)` is an error reply (to return at once,
 * before any write) when Redis's clock is past `deadline` (µs since the epoch, from
 * FencedWrites.fence), else nil. Use: `local late = fenceRefusal(ARGV[n]) if late then return late end`.
 */
export const FENCE_LUA = `
local function fenceRefusal(deadline)
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000000 + tonumber(t[2]) > tonumber(deadline) then
    return redis.error_reply('${LATE}')
  end
  return nil
end
`;

/** The clock sample: no write, so a Redis pausing writes (CLIENT PAUSE WRITE, a failover) still answers it. */
const SERVER_TIME_SCRIPT = `#!lua flags=no-writes
return redis.call('TIME')
`;

/** One command on KEYS[1], fenced. ARGV: the deadline, the command, its other arguments. */
const FENCED_CALL_SCRIPT = `${FENCE_LUA}
local late = fenceRefusal(ARGV[1])
if late then return late end
return redis.call(ARGV[2], KEYS[1], unpack(ARGV, 3))
`;

/**
 * Added to the wait before a failure is answered: the two clocks' rates may differ (NTP allows
 * 500 ppm, 0.125 ms over a 250 ms window), TIME has µs resolution and timers fire a little late or
 * early by rounding. Small against a 503's Retry-After, large against all of these.
 */
const FENCE_MARGIN_MS = 5;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    gatewayServerTime(key: string): Result<[string, string], Context>;
    gatewayFencedCall(
      key: string,
      deadline: number,
      ...commandAndArgs: Array<string | number>
    ): Result<unknown, Context>;
  }
}

/** A write's fence: its deadline on Redis's clock, and when (on this process's monotonic clock) it has surely passed. */
export interface Fence {
  /** µs since the epoch on Redis's clock: a fenced script run later does nothing. */
  deadlineUs: number;
  /** performance.now() after which the deadline has passed on Redis's clock, whatever the estimate's error. */
  closesAt: number;
}

/** The command timeout a client applies: a fenced write is given as long as any command. */
export function commandTimeoutOf(redis: RedisClient): number {
  const options = 'redisOptions' in redis.options ? redis.options.redisOptions : redis.options;
  const ms = (options as { commandTimeout?: number } | undefined)?.commandTimeout;
  if (!ms) throw new Error('fenced writes need a client with a command timeout (redisOptions in redis/clients.ts)');
  return ms;
}

/**
 * Writes that either apply before their answer or never (see the comment above). `windowMs` is
 * how long a write may take: by default the client's command timeout, after which ioredis gives
 * up on it anyway.
 */
export class FencedWrites {
  constructor(
    private readonly redis: RedisClient,
    private readonly windowMs = commandTimeoutOf(redis),
  ) {
    const commands = redis as Partial<Redis>;
    if (typeof commands.gatewayServerTime !== 'function') {
      redis.defineCommand('gatewayServerTime', { numberOfKeys: 1, lua: SERVER_TIME_SCRIPT });
    }
    if (typeof commands.gatewayFencedCall !== 'function') {
      redis.defineCommand('gatewayFencedCall', { numberOfKeys: 1, lua: FENCED_CALL_SCRIPT });
    }
  }

  /**
   * A deadline for a write to `key`, `windowMs` from now on the clock of the Redis that holds it:
   * its time at the sample's reply is estimated as TIME's value plus half the round trip, and the
   * fence is known closed once even the latest that time can be (TIME plus the whole round trip)
   * is past the deadline, plus FENCE_MARGIN_MS.
   */
  async fence(key: string): Promise<Fence> {
    const sent = performance.now();
    const [seconds, micros] = await this.redis.gatewayServerTime(key);
    const received = performance.now();
    const halfTripMs = (received - sent) / 2;
    const serverNowUs = Number(seconds) * 1e6 + Number(micros) + halfTripMs * 1e3;
    return {
      deadlineUs: Math.ceil(serverNowUs + this.windowMs * 1e3),
      closesAt: received + halfTripMs + this.windowMs + FENCE_MARGIN_MS,
    };
  }

  /**
   * Runs `write` (which passes the deadline to a script built on FENCE_LUA) under a fence for
   * `key`. A failure that says Redis cannot be reached is rethrown only once the fence has
   * closed, so whoever answers it (a 503) answers it when the write can no longer apply.
   */
  async run<T>(key: string, write: (deadlineUs: number) => Promise<T>): Promise<T> {
    const fence = await this.fence(key);
    try {
      return await write(fence.deadlineUs);
    } catch (err) {
      if (isRedisUnreachable(err)) {
        const left = fence.closesAt - performance.now();
        if (left > 0) await delay(Math.ceil(left));
      }
      throw err;
    }
  }

  /** One plain command on `key` (SET, GETDEL, DEL…), fenced: `call(key, 'SET', value, 'PXAT', at)`. */
  async call<T = unknown>(key: string, command: string, ...args: Array<string | number>): Promise<T> {
    return this.run(key, (deadline) => this.redis.gatewayFencedCall(key, deadline, command, ...args) as Promise<T>);
  }
}
