import type { RedisClient } from '../redis/clients.js';
import {
  DAY_MS,
  daysTouched,
  emptyCounts,
  type HistoryOutcome,
  HOUR_MS,
  type HourUsage,
  type UsageCounts,
  type UsageHistory,
} from './usage-history.js';

/** Field suffixes of a day's hash: `<hour of day><letter>`, e.g. `13a` = admitted from 13:00 UTC. */
const FIELDS: Record<keyof UsageCounts, string> = {
  admitted: 'a',
  limited: 'l',
  banned: 'b',
  forbidden: 'f',
  units: 'u',
};
const BY_LETTER = new Map(Object.entries(FIELDS).map(([name, letter]) => [letter, name as keyof UsageCounts]));

/** How long counts taken outside the script wait to be written together. */
const FLUSH_MS = 1_000;
/** A replica remembers this many keys it has put in today's index before it starts over. */
const MAX_SEEN = 1_000_000;

/**
 * The shared history, in Redis. One hash per key and UTC day (`<prefix>{<key>}:h:<day>`, in the
 * key's Cluster slot so the limit script writes it in the call it makes anyway): at most 24 × 5
 * small fields, which Redis keeps as one compact listpack. It expires `retention` after its day.
 *
 * Which keys were active on a day is a set per day (`<prefix>usage:keys:<day>`), for the top-keys
 * view. It lives in no key's slot, so the script cannot write it: each replica adds a key the
 * first time it decides for it that day, batched, off the request path.
 */
export class RedisUsageHistory implements UsageHistory {
  readonly kind = 'redis';
  /** `count` calls not yet written: `<key id>\n<hour start>` → counts. */
  private buffered = new Map<string, UsageCounts>();
  private flushTimer: NodeJS.Timeout | null = null;
  private seenDay = -1;
  private readonly seen = new Set<string>();
  private unindexed: string[] = [];
  private indexScheduled = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    readonly retentionMs: number,
    private readonly onError: (err: unknown) => void = () => {},
  ) {}

  dayKey(keyId: string, day: number): string {
    return `${this.prefix}{${keyId}}:h:${day}`;
  }

  private indexKey(day: number): string {
    return `${this.prefix}usage:keys:${day}`;
  }

  /**
   * The limit script's history key and arguments for a batch decided at `now`: the day's hash,
   * the hour's field prefix, and when the hash expires.
   */
  scriptArgs(keyId: string, now: number): [key: string, hourField: string, expireAt: number] {
    const day = Math.floor(now / DAY_MS);
    this.noteActive(keyId, day);
    return [
      this.dayKey(keyId, day),
      String(Math.floor((now - day * DAY_MS) / HOUR_MS)),
      (day + 1) * DAY_MS + this.retentionMs,
    ];
  }

  private noteActive(keyId: string, day: number): void {
    if (day !== this.seenDay || this.seen.size >= MAX_SEEN) {
      // The keys noted so far are the previous day's: indexed under it before the day changes
      // (decisions on both sides of midnight may be noted in one turn).
      if (this.unindexed.length > 0) this.writeIndex();
      this.seenDay = day;
      this.seen.clear();
    }
    if (this.seen.has(keyId)) return;
    this.seen.add(keyId);
    this.unindexed.push(keyId);
    if (!this.indexScheduled) {
      this.indexScheduled = true;
      setImmediate(this.writeIndex);
    }
  }

  private readonly writeIndex = (): void => {
    this.indexScheduled = false;
    const ids = this.unindexed;
    if (ids.length === 0) return;
    this.unindexed = [];
    const day = this.seenDay;
    const key = this.indexKey(day);
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
        // Not in the index yet: the next decision for these keys tries again.
        if (day === this.seenDay) for (const id of ids) this.seen.delete(id);
        this.onError(err);
      });
  };

  count(keyId: string, outcome: HistoryOutcome, units: number, at: number): void {
    const hour = at - (at % HOUR_MS);
    this.noteActive(keyId, Math.floor(at / DAY_MS));
    const id = `${keyId}\n${hour}`;
    let counts = this.buffered.get(id);
    if (!counts) {
      counts = emptyCounts();
      this.buffered.set(id, counts);
    }
    counts[outcome]++;
    counts.units += units;
    if (!this.flushTimer) {
      this.flushTimer = setTimeout(() => {
        this.flushTimer = null;
        this.flush().catch(this.onError);
      }, FLUSH_MS);
      this.flushTimer.unref();
    }
  }

  async flush(): Promise<void> {
    if (this.flushTimer) {
      clearTimeout(this.flushTimer);
      this.flushTimer = null;
    }
    if (this.buffered.size === 0) return;
    const batch = this.buffered;
    this.buffered = new Map();
    // One command per field, not a pipeline: under Redis Cluster the keys are in many slots.
    const writes: Promise<unknown>[] = [];
    for (const [id, counts] of batch) {
      const [keyId, hourText] = id.split('\n') as [string, string];
      const hour = Number(hourText);
      const day = Math.floor(hour / DAY_MS);
      const key = this.dayKey(keyId, day);
      const hourOfDay = (hour - day * DAY_MS) / HOUR_MS;
      for (const [name, letter] of Object.entries(FIELDS)) {
        const n = counts[name as keyof UsageCounts];
        if (n > 0) writes.push(this.redis.hincrby(key, `${hourOfDay}${letter}`, n));
      }
      writes.push(this.redis.pexpireat(key, (day + 1) * DAY_MS + this.retentionMs));
    }
    await Promise.all(writes);
  }

  async hours(keyId: string, from: number, to: number): Promise<HourUsage[]> {
    await this.flush();
    const days = daysTouched(from, to);
    const hashes = await Promise.all(days.map((day) => this.redis.hgetall(this.dayKey(keyId, day))));
    const out: HourUsage[] = [];
    days.forEach((day, i) => {
      const byHour = new Map<number, HourUsage>();
      for (const [field, value] of Object.entries(hashes[i] ?? {})) {
        const name = BY_LETTER.get(field.slice(-1));
        const hourOfDay = Number(field.slice(0, -1));
        if (!name || !Number.isInteger(hourOfDay)) continue;
        const hour = day * DAY_MS + hourOfDay * HOUR_MS;
        if (hour < from || hour >= to) continue;
        let usage = byHour.get(hour);
        if (!usage) {
          usage = { hour, ...emptyCounts() };
          byHour.set(hour, usage);
        }
        usage[name] += Number(value);
      }
      out.push(...[...byHour.values()].sort((a, b) => a.hour - b.hour));
    });
    return out;
  }

  async activeKeys(from: number, to: number): Promise<string[]> {
    const days = daysTouched(from, to);
    const sets = await Promise.all(days.map((day) => this.redis.smembers(this.indexKey(day))));
    return [...new Set(sets.flat())];
  }
}
