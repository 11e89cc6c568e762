import type { Redis, Result } from 'ioredis';
import type { RedisClient } from '../redis/clients.js';
import { isRedisUnreachable } from '../redis/errors.js';
import { FENCE_LUA, FencedWrites } from '../redis/fenced-writes.js';
import {
  DAY_MS,
  daysTouched,
  emptyStored,
  type HistoryOutcome,
  HOUR_MS,
  type HourUsage,
  hourStart,
  isCustomerId,
  type RouteHour,
  reported,
  type StoredCounts,
  type UsageHistory,
} from './usage-history.js';
import type { FieldsRecord, SpoolSegment } from './usage-spool.js';
import { WriteBehind } from './write-behind.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    gatewaySpoolReplay(
      dayKey: string,
      marker: string,
      expireAt: number,
      ...fields: Array<string | number>
    ): Result<number, Context>;
    /** numberOfKeys, the day hashes, then gatewayHashAdd's ARGV (HASH_ADD_SCRIPT). */
    gatewayHashAdd(...keysThenArgs: Array<string | number>): Result<number, Context>;
  }
}

/**
 * A spooled segment's counts into one day hash, once: KEYS the hash and the segment's mark beside
 * it (same slot); ARGV the hash's expiry, then field, count pairs. The mark lives as long as the
 * hash, so a replay of the same segment, however late, adds nothing. Returns 1 when it added.
 */
const SPOOL_REPLAY_SCRIPT = `
if not redis.call('SET', KEYS[2], '1', 'NX', 'PXAT', ARGV[1]) then return 0 end
for i = 2, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
return 1
`;

/**
 * A write-behind batch's counts into day hashes, fenced (redis/fenced-writes.ts): KEYS the hashes;
 * ARGV the fence's deadline, then per hash its expiry, its number of field and count pairs, and
 * the pairs. A call refused by its fence wrote nothing and never lands later, so what it carried
 * can be spooled and written once (usage-spool.ts). A hash that cannot take its counts (another
 * type under its name) does not stop the others: the reply is its error, the first if several.
 */
const HASH_ADD_SCRIPT = `${FENCE_LUA}
local late = fenceRefusal(ARGV[1])
if late then return late end
local a, failed = 2, nil
for k = 1, #KEYS do
  local expireAt, fields = ARGV[a], tonumber(ARGV[a + 1])
  a = a + 2
  local wrote = true
  for _ = 1, fields do
    local reply = redis.pcall('HINCRBY', KEYS[k], ARGV[a], ARGV[a + 1])
    if type(reply) == 'table' and reply.err then
      wrote = false
      failed = failed or reply
    end
    a = a + 2
  end
  if wrote then redis.call('PEXPIREAT', KEYS[k], expireAt) end
end
if failed then return failed end
return 1
`;

/**
 * Day hashes one HASH_ADD_SCRIPT call writes on a server that is not a Cluster (on a Cluster each
 * hash is in a slot of its own: one a call). The history writes a hash per key and hour each
 * second, so with many keys in use a call per hash was a call per request beside the limit
 * script's, each with its own clock sample for the fence (bench:profile -- --keys 100000: 3.0
 * EVALSHA a request). A hundred hashes run in about 2 ms inside Redis, within any command timeout.
 */
const HASHES_PER_CALL = 100;

/**
 * Field suffixes of a day's hash: `<hour><letter>`, e.g. `13a` = admitted in the hour from 13:00
 * UTC, or `13:30a` in the local hour from 13:30 UTC of a customer in a zone a part-hour off UTC
 * (hourStart). `x` and `y` (failed upstream, and their units) are written only for an hour that
 * has some.
 */
const FIELDS: Record<keyof StoredCounts, string> = {
  admitted: 'a',
  limited: 'l',
  banned: 'b',
  outOfCredits: 'c',
  forbidden: 'f',
  units: 'u',
  upstreamFailed: 'x',
  upstreamFailedUnits: 'y',
};
const BY_LETTER = new Map(Object.entries(FIELDS).map(([name, letter]) => [letter, name as keyof StoredCounts]));

const MINUTE_MS = 60_000;

/** An hour's UTC day (days since the epoch) and its name in that day's hash: `13`, or `13:30`. */
function hourName(hour: number): { day: number; name: string } {
  const day = Math.floor(hour / DAY_MS);
  const minutes = (hour - day * DAY_MS) / MINUTE_MS;
  const past = minutes % 60;
  const name = `${(minutes - past) / 60}${past === 0 ? '' : `:${String(past).padStart(2, '0')}`}`;
  return { day, name };
}

/** The start of the hour a field's name gives (its last letter is the count's), or null. */
function hourOfField(day: number, field: string): number | null {
  const match = /^(\d{1,2})(?::(\d{2}))?$/.exec(field.slice(0, -1));
  if (!match) return null;
  return day * DAY_MS + Number(match[1]) * HOUR_MS + Number(match[2] ?? 0) * MINUTE_MS;
}

/** A replica remembers this many keys it has put in today's index before it starts over. */
const MAX_SEEN = 1_000_000;

/**
 * The shared history, in Redis. One hash per key and UTC day (`<prefix>{<key>}:h:<day>`, in the
 * key's Cluster slot so the limit script writes it in the call it makes anyway): at most 24 × 5
 * small fields, which Redis keeps as one compact listpack. It expires `retention` after its day.
 *
 * Which keys were active on a day is a set per day (`<prefix>usage:keys:<day>`), for the top-keys
 * view; which customers, another (`<prefix>usage:customers:<day>`), told apart by the id (a
 * customer's hours are kept under its `cus_…` id, see isCustomerId), so neither list is read to
 * answer the other. They live in no key's slot, so the script cannot write them: each replica adds
 * an id the first time it decides for it that day, batched, off the request path. Each expires
 * with the day's hours, `retention` after the day: a shorter life would drop from a week's top
 * lists everything not active today.
 */
export class RedisUsageHistory implements UsageHistory {
  readonly kind = 'redis';
  /** `count` and `upstreamFailed` calls not yet written: `<key id>\n<hour start>` → counts. */
  private readonly buffered: WriteBehind<StoredCounts>;
  /** `served` calls not yet written: `<id>\n<hour start>\n<route>` → units. */
  private readonly bufferedRoutes: WriteBehind<number>;
  /**
   * Per UTC day, the ids this replica has put (or is putting) in the day's index. Two days at a
   * time: for half an hour after midnight a customer a part-hour off UTC still decides in an hour
   * of the day before (hourStart), beside everyone else's of the new day.
   */
  private readonly seen = new Map<number, Set<string>>();
  /** Ids noted and not yet written, per day. */
  private unindexed = new Map<number, string[]>();
  private indexScheduled = false;
  private readonly fences: FencedWrites;
  /** Where counts wait that could not be written (the usage spool); none: they are lost, and logged. */
  private spool: ((record: FieldsRecord) => void) | null = null;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    readonly retentionMs: number,
    private readonly onError: (err: unknown) => void = () => {},
  ) {
    this.buffered = new WriteBehind((batch) => this.writeCounts(batch), onError);
    this.bufferedRoutes = new WriteBehind((batch) => this.writeRoutes(batch), onError);
    if (typeof (redis as Partial<Redis>).gatewaySpoolReplay !== 'function') {
      redis.defineCommand('gatewaySpoolReplay', { numberOfKeys: 2, lua: SPOOL_REPLAY_SCRIPT });
    }
    if (typeof (redis as Partial<Redis>).gatewayHashAdd !== 'function') {
      redis.defineCommand('gatewayHashAdd', { lua: HASH_ADD_SCRIPT });
    }
    this.fences = new FencedWrites(redis);
  }

  /** Counts whose write fails while Redis is away go to `spool`, to be replayed once it is back. */
  spoolTo(spool: (record: FieldsRecord) => void): void {
    this.spool = spool;
  }

  /**
   * Writes a spooled segment (usage-spool.ts): its records summed per day hash, each hash's sum
   * added once under the segment's id (SPOOL_REPLAY_SCRIPT), in the hours the decisions were taken
   * in. Hours already past the retention are dropped. Rejects when any write fails: the caller
   * replays the whole segment again, and the hashes already written add nothing then.
   */
  async replay(segment: SpoolSegment): Promise<void> {
    const byHash = new Map<string, { expireAt: number; fields: Map<string, number> }>();
    const now = Date.now();
    for (const record of segment.records) {
      // Refunds are the ledger's (CreditRefunds.replay).
      if ('kind' in record && record.kind === 'refund') continue;
      const expireAt = this.expiry(record.hour);
      if (expireAt <= now) continue;
      const { day, name } = hourName(record.hour);
      const key = this.dayKey(record.id, day, record.customerId);
      this.noteActive(record.id, day);
      let hash = byHash.get(key);
      if (!hash) {
        hash = { expireAt, fields: new Map() };
        byHash.set(key, hash);
      }
      const add = (letter: string, n: number) =>
        hash.fields.set(`${name}${letter}`, (hash.fields.get(`${name}${letter}`) ?? 0) + n);
      if ('kind' in record) {
        if (record.kind === 'fields') for (const [suffix, n] of Object.entries(record.fields)) add(suffix, n);
        continue;
      }
      add(FIELDS[record.outcome], 1);
      if (record.units > 0) add(FIELDS.units, record.units);
    }
    await Promise.all(
      [...byHash].map(([key, { expireAt, fields }]) =>
        this.redis.gatewaySpoolReplay(key, `${key}:spool:${segment.id}`, expireAt, ...[...fields].flat()),
      ),
    );
  }

  /**
   * The day's hash of a key (or a customer: its hours are the sum of its keys', kept under its
   * id). A key of a customer keeps its hours in the customer's Cluster slot
   * (`<prefix>{<customer>}:<key>:h:<day>`), beside the customer's own, so the limit script writes
   * both in one call; a key without one keeps `<prefix>{<key>}:h:<day>`, as before customers.
   */
  dayKey(id: string, day: number, customerId?: string): string {
    if (customerId !== undefined) return `${this.prefix}{${customerId}}:${id}:h:${day}`;
    return `${this.prefix}{${id}}:h:${day}`;
  }

  private indexKey(day: number, customers = false): string {
    return `${this.prefix}usage:${customers ? 'customers' : 'keys'}:${day}`;
  }

  /**
   * The limit script's history key and arguments for a batch decided at `now`: the day's hash,
   * the hour's name in it (the hour of hourStart(now, shiftMs): the policy's hourShiftMs, the same
   * for a key of a customer and the customer) and when the hash expires.
   */
  scriptArgs(
    keyId: string,
    now: number,
    customerId?: string,
    shiftMs = 0,
  ): [key: string, hourField: string, expireAt: number] {
    const hour = hourStart(now, shiftMs);
    const { day, name } = hourName(hour);
    this.noteActive(keyId, day);
    return [this.dayKey(keyId, day, customerId), name, this.expiry(hour)];
  }

  /**
   * When the day's hash of an hour expires: `retention` after its day's last hour ends (the end
   * of the UTC day, or a local hour's `shiftMs` after it).
   */
  private expiry(hour: number): number {
    return (Math.floor(hour / DAY_MS) + 1) * DAY_MS + (hour % HOUR_MS) + this.retentionMs;
  }

  private noteActive(keyId: string, day: number): void {
    let seen = this.seen.get(day);
    if (!seen || seen.size >= MAX_SEEN) {
      seen = new Set();
      this.seen.set(day, seen);
      for (const other of this.seen.keys()) if (other !== day && other !== day - 1) this.seen.delete(other);
    }
    if (seen.has(keyId)) return;
    seen.add(keyId);
    const ids = this.unindexed.get(day);
    if (ids) ids.push(keyId);
    else this.unindexed.set(day, [keyId]);
    if (!this.indexScheduled) {
      this.indexScheduled = true;
      setImmediate(this.writeIndex);
    }
  }

  private readonly writeIndex = (): void => {
    this.indexScheduled = false;
    const batches = this.unindexed;
    this.unindexed = new Map();
    for (const [day, ids] of batches) {
      const customers = ids.filter(isCustomerId);
      const keys = customers.length === 0 ? ids : ids.filter((id) => !isCustomerId(id));
      // One transaction per index: under Redis Cluster the two sets are in different slots.
      if (keys.length > 0) this.addToIndex(day, keys, false);
      if (customers.length > 0) this.addToIndex(day, customers, true);
    }
  };

  private addToIndex(day: number, ids: string[], customers: boolean): void {
    const key = this.indexKey(day, customers);
    this.redis
      .multi()
      .sadd(key, ...ids)
      .pexpireat(key, (day + 1) * DAY_MS + this.retentionMs)
      .exec()
      .then((replies) => {
        const failed = replies?.find(([err]) => err)?.[0];
        if (failed) throw failed;
      })
      .catch((err: unknown) => {
        // Not in the index yet: the next decision for these ids tries again.
        const seen = this.seen.get(day);
        if (seen) for (const id of ids) seen.delete(id);
        this.onError(err);
      });
  }

  count(keyId: string, outcome: HistoryOutcome, units: number, at: number, shiftMs = 0, customerId?: string): void {
    const counts = this.bufferedHour(keyId, hourStart(at, shiftMs), customerId);
    counts[outcome]++;
    counts.units += units;
  }

  /** Written as count's are, with the counts negative (HINCRBY takes them). */
  uncount(keyId: string, outcome: HistoryOutcome, units: number, at: number, shiftMs = 0, customerId?: string): void {
    const counts = this.bufferedHour(keyId, hourStart(at, shiftMs), customerId);
    counts[outcome]--;
    counts.units -= units;
  }

  upstreamFailed(keyId: string, units: number, admittedAt: number, shiftMs = 0): void {
    const counts = this.bufferedHour(keyId, hourStart(admittedAt, shiftMs));
    counts.upstreamFailed++;
    counts.upstreamFailedUnits += units;
  }

  /**
   * Served units by route, in the day's hash beside the hour's counts, as the field
   * `<hour>|<route>` (`13|GET /v1/pets`), which hours() skips (no count letter after the hour).
   * Off the request path: the hot path pays a Map increment and this replica's day index check,
   * 2.4-4.4 µs a call measured (2,000,000 calls over 1,000 customers and 3 routes, three rounds, on
   * the shared two-core development machine at load average 18), against the milliseconds a
   * proxied request takes; Redis gets one HINCRBY per customer, hour and route per second per
   * replica, batched as upstreamFailed's are, instead of more work inside every script call. Not in
   * the limit script: it would need each request's route as an argument and a write per route
   * per batch, and a route's served units are known only when the upstream has answered. A
   * replica that dies loses at most its last second of them; the closer names that gap
   * (metering/closer.ts) rather than letting the routes and the total disagree.
   */
  served(id: string, route: string, units: number, admittedAt: number, shiftMs = 0): void {
    const hour = hourStart(admittedAt, shiftMs);
    this.noteActive(id, Math.floor(hour / DAY_MS));
    const field = `${id}\n${hour}\n${route}`;
    this.bufferedRoutes.set(field, (this.bufferedRoutes.get(field) ?? 0) + units);
  }

  async routeHours(id: string, from: number, to: number): Promise<RouteHour[]> {
    await this.flush();
    const days = daysTouched(from, to);
    const hashes = await Promise.all(days.map((day) => this.redis.hgetall(this.dayKey(id, day))));
    const out: RouteHour[] = [];
    days.forEach((day, i) => {
      const byHour = new Map<number, Record<string, number>>();
      for (const [field, value] of Object.entries(hashes[i] ?? {})) {
        const bar = field.indexOf('|');
        if (bar < 0) continue;
        const hour = hourOfField(day, `${field.slice(0, bar)}u`);
        if (hour === null || hour < from || hour >= to) continue;
        const routes = byHour.get(hour) ?? {};
        routes[field.slice(bar + 1)] = Number(value);
        byHour.set(hour, routes);
      }
      out.push(...[...byHour].sort((a, b) => a[0] - b[0]).map(([hour, routes]) => ({ hour, routes })));
    });
    return out;
  }

  /** The counts of the key's hour starting at `hour` waiting to be written; the write is scheduled. */
  private bufferedHour(keyId: string, hour: number, customerId = ''): StoredCounts {
    this.noteActive(keyId, Math.floor(hour / DAY_MS));
    const id = `${keyId}\n${hour}\n${customerId}`;
    let counts = this.buffered.get(id);
    if (!counts) {
      counts = emptyStored();
      this.buffered.set(id, counts);
    }
    return counts;
  }

  /** Writes what is buffered (served's routes, then the counts); rejects as the first write that failed. */
  async flush(): Promise<void> {
    await Promise.all([this.bufferedRoutes.flush(), this.buffered.flush()]);
  }

  /**
   * Writes buffered counts (see count): one fenced script per day hash, not a pipeline, since under
   * Redis Cluster the keys are in many slots.
   */
  private writeCounts(batch: ReadonlyMap<string, StoredCounts>): Promise<unknown> {
    const records: FieldsRecord[] = [];
    for (const [id, counts] of batch) {
      const [keyId, hourText, customerId] = id.split('\n') as [string, string, string];
      const fields: Record<string, number> = {};
      for (const [name, letter] of Object.entries(FIELDS)) {
        const n = counts[name as keyof StoredCounts];
        // Below zero: a decision taken back (uncount).
        if (n !== 0) fields[letter] = n;
      }
      const record: FieldsRecord = {
        kind: 'fields',
        id: keyId,
        ...(customerId === '' ? {} : { customerId }),
        hour: Number(hourText),
        fields,
      };
      records.push(record);
    }
    return this.writeAll(records);
  }

  /** Writes buffered served units by route (see served), one fenced script per hash as writeCounts. */
  private writeRoutes(batch: ReadonlyMap<string, number>): Promise<unknown> {
    const byHour = new Map<string, FieldsRecord>();
    for (const [field, units] of batch) {
      const [id, hourText, route] = field.split('\n') as [string, string, string];
      const at = `${id}\n${hourText}`;
      let record = byHour.get(at);
      if (!record) {
        record = { kind: 'fields', id, hour: Number(hourText), fields: {} };
        byHour.set(at, record);
      }
      record.fields[`|${route}`] = (record.fields[`|${route}`] ?? 0) + units;
    }
    return this.writeAll([...byHour.values()]);
  }

  /**
   * Hours' fields into their days' hashes, fenced, HASHES_PER_CALL hashes a call (one on a
   * Cluster): when Redis cannot be reached a call has not landed and never will (its fence has
   * closed when this learns of it), so its records go to the spool, which writes them once Redis
   * answers; without a spool they are lost, and logged (onError).
   */
  private async writeAll(records: readonly FieldsRecord[]): Promise<void> {
    const writes = records.filter((record) => Object.keys(record.fields).length > 0);
    const perCall = this.redis.isCluster ? 1 : HASHES_PER_CALL;
    const calls: Promise<void>[] = [];
    for (let i = 0; i < writes.length; i += perCall) calls.push(this.writeHashes(writes.slice(i, i + perCall)));
    await Promise.all(calls);
  }

  private async writeHashes(records: readonly FieldsRecord[]): Promise<void> {
    const keys: string[] = [];
    const args: Array<string | number> = [];
    for (const record of records) {
      const { day, name } = hourName(record.hour);
      keys.push(this.dayKey(record.id, day, record.customerId));
      const fields = Object.entries(record.fields);
      args.push(this.expiry(record.hour), fields.length);
      for (const [suffix, n] of fields) args.push(`${name}${suffix}`, n);
    }
    try {
      await this.fences.run(keys[0] as string, (deadline) =>
        this.redis.gatewayHashAdd(keys.length, ...keys, deadline, ...args),
      );
    } catch (err) {
      if (!this.spool || !isRedisUnreachable(err)) throw err;
      for (const record of records) this.spool(record);
    }
  }

  /**
   * A key of a customer has two hashes a day: its hours from before it had a customer (and the
   * counts taken outside the script that name no customer: refusals of a ban already known,
   * upstream failures) under its own id, and its hours as the customer's (the script's, and a
   * fallback limiter's decisions: count's customerId) under the customer's slot; both are read
   * and summed. A key moved from one
   * customer to another shows only its current customer's era and its lone one: the earlier
   * customer's era stays in that customer's history, not in the key's view.
   */
  async hours(keyId: string, from: number, to: number, customerId?: string): Promise<HourUsage[]> {
    await this.flush();
    const days = daysTouched(from, to);
    const keys = (day: number) =>
      customerId === undefined
        ? [this.dayKey(keyId, day)]
        : [this.dayKey(keyId, day), this.dayKey(keyId, day, customerId)];
    const hashes = await Promise.all(days.map((day) => Promise.all(keys(day).map((key) => this.redis.hgetall(key)))));
    const out: HourUsage[] = [];
    days.forEach((day, i) => {
      const byHour = new Map<number, StoredCounts>();
      const fields = (hashes[i] ?? []).flatMap((hash) => Object.entries(hash));
      for (const [field, value] of fields) {
        const name = BY_LETTER.get(field.slice(-1));
        const hour = hourOfField(day, field);
        if (!name || hour === null || hour < from || hour >= to) continue;
        let stored = byHour.get(hour);
        if (!stored) {
          stored = emptyStored();
          byHour.set(hour, stored);
        }
        stored[name] += Number(value);
      }
      const hours = [...byHour].map(([hour, stored]) => ({ hour, ...reported(stored) }));
      out.push(...hours.sort((a, b) => a.hour - b.hour));
    });
    return out;
  }

  async activeKeys(from: number, to: number): Promise<string[]> {
    return this.activeIds(from, to, false);
  }

  async activeCustomers(from: number, to: number): Promise<string[]> {
    return this.activeIds(from, to, true);
  }

  private async activeIds(from: number, to: number, customers: boolean): Promise<string[]> {
    const days = daysTouched(from, to);
    const sets = await Promise.all(days.map((day) => this.redis.smembers(this.indexKey(day, customers))));
    return [...new Set(sets.flat())];
  }
}
