import type { RedisClient } from '../src/redis/clients.js';

/** Drops what a glob would read as a pattern: prefixes are letters, digits and ':' in practice. */
const literal = (text: string): string => text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);

/**
 * Moves every TTL it is given `by` ms earlier, in one step (a key whose instant has passed is
 * expired by Redis itself, as PEXPIREAT does with an instant in the past).
 */
const SHIFT = `
local by = tonumber(ARGV[1])
for _, key in ipairs(KEYS) do
  local at = redis.call('PEXPIRETIME', key)
  if at > 0 then redis.call('PEXPIREAT', key, at - by) end
end
return #KEYS
`;

/**
 * The clock of a gateway under test and of the Redis it uses, moved on together. It stands still
 * until the test moves it, and starts at the real time.
 *
 * Redis expires keys by its own wall clock, which no client can set, and libfaketime cannot run
 * Debian's redis-server (it hangs against jemalloc at start). So moving on by some time moves the
 * expiry of every key under the gateway's prefix that much earlier: a key whose end has come is
 * expired by Redis's own TTL, exactly as at the later time, nothing is deleted by hand, and a key
 * still alive keeps the time it has left. BullMQ's keys (`{<prefix>webhooks}…`) are left alone:
 * their locks and schedules run on the real time.
 *
 * One limit: a key written after a move with an absolute expiry (PEXPIREAT from this clock)
 * lives as much longer as the clock is ahead of the real time by then. Write what must expire
 * before moving the clock past its end; a key written with a relative TTL is always right.
 */
export class RedisClock {
  private at: number;
  private redis: RedisClient | null = null;

  constructor(
    private readonly prefix: string,
    start: number = Date.now(),
  ) {
    this.at = start;
  }

  readonly now = (): number => this.at;

  /** The Redis whose keys under the prefix age with this clock (none: the clock alone moves). */
  use(redis: RedisClient | null): this {
    this.redis = redis;
    return this;
  }

  /** Moves on to `at` (epoch ms); a clock never goes back. */
  async moveTo(at: number): Promise<void> {
    const by = at - this.at;
    if (by < 0)
      throw new Error(`RedisClock: ${new Date(at).toISOString()} is before ${new Date(this.at).toISOString()}`);
    if (this.redis && by > 0) {
      const redis = this.redis;
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${literal(this.prefix)}*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length > 0) await redis.eval(SHIFT, keys.length, ...keys, by);
      } while (cursor !== '0');
    }
    this.at = at;
  }

  async advance(ms: number): Promise<void> {
    await this.moveTo(this.at + ms);
  }
}
