import type { Redis, Result } from 'ioredis';
import type { RedisClient } from '../redis/clients.js';
import type { HourTotals, MeteringRecord } from './metering-event.js';
import {
  type Appended,
  cursorOf,
  type MeteringPage,
  type MeteringStore,
  positionOf,
  totalsDigest,
} from './metering-store.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    meteringRecord(
      stream: string,
      last: string,
      ...args: Array<string | number>
    ): Result<[number, number] | null, Context>;
  }
}

/**
 * KEYS: the stream, the hour's last-revision hash. ARGV: the totals' digest, their units, the
 * record's JSON (without revision and delta), how long both are kept (ms). Compares with the last
 * revision and appends the next one in one step, so replicas closing the same hour at once append
 * it once. The stream's ids are Redis's clock (XADD *), so entries older than the retention are
 * trimmed by that clock too: trimmed by the gateway's, a gateway ahead of Redis by more than the
 * retention (a test clock) trimmed every entry as it was added.
 */
const RECORD_SCRIPT = `
local last = redis.call('HMGET', KEYS[2], 'r', 'd', 'u')
if last[2] == ARGV[1] then return false end
local units = tonumber(ARGV[2])
if not last[1] and units == 0 then return false end
local revision = tonumber(last[1] or '0') + 1
local delta = units - tonumber(last[3] or '0')
redis.call('HSET', KEYS[2], 'r', revision, 'd', ARGV[1], 'u', units)
redis.call('PEXPIRE', KEYS[2], ARGV[4])
local time = redis.call('TIME')
local oldest = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) - tonumber(ARGV[4])
redis.call('XADD', KEYS[1], 'MINID', '~', string.format('%d-0', math.max(0, oldest)), '*', 'j', ARGV[3], 'r', revision, 'v', delta)
return {revision, delta}
`;

/**
 * The export in Redis: one stream of records (`<prefix>{metering}:events`, appended in record
 * order, read with XRANGE from a cursor) and per subject and hour its last revision
 * (`<prefix>{metering}:last:<subject>:<hour>`), in one Cluster slot so one script writes both.
 * Both are kept as long as the usage history (USAGE_HISTORY_DAYS): a correction cannot come later.
 * They are what a billing job reads back after a gateway restart: Redis must persist (AOF or RDB).
 */
export class RedisMeteringStore implements MeteringStore {
  readonly kind = 'redis';

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly retentionMs: number,
  ) {
    if (typeof (redis as Partial<Redis>).meteringRecord !== 'function') {
      redis.defineCommand('meteringRecord', { lua: RECORD_SCRIPT, numberOfKeys: 2 });
    }
  }

  private get stream(): string {
    return `${this.prefix}{metering}:events`;
  }

  async record(totals: HourTotals, at: number): Promise<Appended | null> {
    const json = JSON.stringify({ ...totals, closedAt: at });
    const appended = await this.redis.meteringRecord(
      this.stream,
      `${this.prefix}{metering}:last:${totals.subject}:${totals.hour}`,
      totalsDigest(totals),
      totals.units,
      json,
      this.retentionMs,
    );
    return appended === null ? null : { revision: Number(appended[0]), delta: Number(appended[1]) };
  }

  async read(after: string | null, limit: number): Promise<MeteringPage> {
    const start = after === null ? '-' : `(${positionOf(after)}`;
    const entries = await this.redis.xrange(this.stream, start, '+', 'COUNT', limit);
    const records = entries.map(([, fields]) => toRecord(fields));
    const last = entries.at(-1);
    return { records, next: last ? cursorOf(last[0]) : after };
  }
  async claim(name: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(`${this.prefix}{metering}:claim:${name}`, '1', 'PX', ttlMs, 'NX')) === 'OK';
  }
}

/** A stream entry's fields (`j` the totals' JSON, `r` revision, `v` delta) as a record. */
function toRecord(fields: string[]): MeteringRecord {
  const byName = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) byName.set(fields[i] as string, fields[i + 1] as string);
  const totals = JSON.parse(byName.get('j') ?? '{}') as HourTotals & { closedAt: number };
  return { ...totals, revision: Number(byName.get('r')), delta: Number(byName.get('v')) };
}
