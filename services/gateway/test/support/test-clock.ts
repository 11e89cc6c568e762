import type { Cluster, Redis } from 'ioredis';
import { DAY_MS } from '../../src/usage/usage-history.js';

const HOUR_MS = 3_600_000;

/**
 * Now, or an hour past the next 00:00 UTC when that is less than an hour away: a test that moves
 * its clock by minutes then never sees the day turn under it. Never behind real time, so an expiry
 * a gateway sets at an instant of this clock (PEXPIREAT) is still ahead in Redis. But when it
 * starts ahead, such an expiry stays that much longer in Redis than on this clock (aging moves
 * every TTL alike): a test of when an instant-set key goes starts from testClockFrom(Date.now()).
 */
function clockStart(at = Date.now()): number {
  const toMidnight = DAY_MS - (at % DAY_MS);
  return toMidnight < HOUR_MS ? at + toMidnight + HOUR_MS : at;
}

/**
 * Takes `ARGV[1]` ms off every TTL (a negative number gives it back); a key whose TTL runs out
 * goes, as Redis expires it.
 */
const AGE_SCRIPT = `
local ms = tonumber(ARGV[1])
for _, key in ipairs(KEYS) do
  -- 0: due to expire this millisecond (-1: no TTL, -2: gone).
  local left = redis.call('PTTL', key)
  if left >= 0 then
    if left <= ms then redis.call('DEL', key) else redis.call('PEXPIRE', key, left - ms) end
  end
end
return 0
`;

/** Escapes what a SCAN pattern would read as a glob (prefixes are letters, digits and ':' in practice). */
const literal = (text: string): string => text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);

/**
 * Lets `ms` pass for every key under `prefix` in a Redis (standalone or Sentinel's master), or in
 * every master of a Cluster, as the passing of time would: each TTL shortened, and each key whose
 * TTL runs out gone. Nothing without a TTL is touched, and nothing goes sooner than its TTL says,
 * so state that outlives its period stays visible. A negative `ms` lengthens each TTL: time that
 * passed on the wall clock but not on the test's.
 */
async function ageRedis(client: Redis | Cluster, prefix: string, ms: number): Promise<void> {
  // A Cluster's keys are on its masters, each SCANned on its own; a script there takes keys of one
  // slot only, so one key a call.
  const nodes = client.isCluster ? (client as Cluster).nodes('master') : [client as Redis];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${literal(prefix)}*`, 'COUNT', 1_000);
      cursor = next;
      if (client.isCluster) for (const key of keys) await node.eval(AGE_SCRIPT, 1, key, ms);
      else if (keys.length > 0) await node.eval(AGE_SCRIPT, keys.length, ...keys, ms);
    } while (cursor !== '0');
  }
}

/** Redis state that ages with a test clock: every key under `prefix`. */
export interface AgingState {
  client: Redis | Cluster;
  prefix: string;
}

/** A clock that moves only when the test moves it. */
export interface TestClock {
  now(): number;
  /**
   * Moves the clock, and with it the TTLs of the Redis state it ages (see ageRedis): by what the
   * clock moved less what the wall clock did since the last move, so that TTLs follow this clock
   * and not the time the test takes. Never sooner: a key set between two moves outlives its time
   * on this clock by as long as the wall clock ran from the first move to its setting (a few
   * milliseconds, more on a busy machine).
   */
  advance(ms: number): Promise<void>;
  /** Moves the clock on to `at` (epoch ms), as advance does; a clock never goes back. */
  moveTo(at: number): Promise<void>;
  /** From now on, `state` ages with this clock too. */
  ages(state: AgingState): void;
}

/**
 * A test clock from `clockStart()`; the Redis state it is given ages with it. BullMQ's keys
 * (`{<prefix>webhooks}…`) lie outside the prefix and run on real time, as their locks need.
 */
export function testClock(...aging: AgingState[]): TestClock {
  return testClockFrom(clockStart(), ...aging);
}

/** A test clock from `start` (epoch ms): for a test that needs a given hour or day. */
export function testClockFrom(start: number, ...aging: AgingState[]): TestClock {
  let at = start;
  let wall = Date.now();
  const advance = async (ms: number) => {
    at += ms;
    const passed = Date.now() - wall;
    wall += passed;
    if (ms !== passed) for (const { client, prefix } of aging) await ageRedis(client, prefix, ms - passed);
  };
  return {
    now: () => at,
    advance,
    async moveTo(to) {
      if (to < at) throw new Error(`test clock: ${new Date(to).toISOString()} is before ${new Date(at).toISOString()}`);
      await advance(to - at);
    },
    ages: (state) => void aging.push(state),
  };
}
