/**
 * Per key and per UTC hour: what the limiter decided. Support answers "why was I refused
 * yesterday at 15:00?" and billing "how much did this customer use last month?" from it.
 */
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

export type HistoryOutcome = 'admitted' | 'limited' | 'banned' | 'forbidden';

/** One hour (or day) of one key. `refused` is not stored: limited + banned. */
export interface UsageCounts {
  admitted: number;
  /** Refused by a window's limit (429 rate_limit_exceeded; in shadow mode, let through). */
  limited: number;
  /** Refused by a ban (429 api_key_banned). */
  banned: number;
  /** A scope or address the key lacks (403), at no cost. */
  forbidden: number;
  /** Units the admitted requests cost (a request costs 1 unless its route says more). */
  units: number;
}

export interface HourUsage extends UsageCounts {
  /** The hour's start, epoch ms (UTC). */
  hour: number;
}

/** The UTC days (days since the epoch) that [from, to) touches, oldest first. */
export function daysTouched(from: number, to: number): number[] {
  const days: number[] = [];
  for (let day = Math.floor(from / DAY_MS); day * DAY_MS < to; day++) days.push(day);
  return days;
}

export function emptyCounts(): UsageCounts {
  return { admitted: 0, limited: 0, banned: 0, forbidden: 0, units: 0 };
}

export function addCounts(into: UsageCounts, from: UsageCounts): void {
  into.admitted += from.admitted;
  into.limited += from.limited;
  into.banned += from.banned;
  into.forbidden += from.forbidden;
  into.units += from.units;
}

/**
 * The history's store. The shared limiter writes its own decisions inside its script (see
 * RedisUsageHistory.scriptArgs); `count` takes the decisions made elsewhere: the embedded
 * limiter's, and a replica's refusals of a ban it already knows.
 */
export interface UsageHistory {
  readonly kind: 'redis' | 'memory';
  /** How far back hours are kept, in ms. */
  readonly retentionMs: number;
  count(keyId: string, outcome: HistoryOutcome, units: number, at: number): void;
  /** The key's hours in [from, to) (epoch ms, hour-aligned by the caller) that hold anything. */
  hours(keyId: string, from: number, to: number): Promise<HourUsage[]>;
  /** Every key with at least one decision in the UTC days that [from, to) touches. */
  activeKeys(from: number, to: number): Promise<string[]>;
  /** Writes what `count` buffered (RedisUsageHistory); called on close. */
  flush(): Promise<void>;
}

/** The embedded mode's history: this process only, lost with it. */
export class MemoryUsageHistory implements UsageHistory {
  readonly kind = 'memory';
  /** Key id → hour start → counts. */
  private readonly keys = new Map<string, Map<number, UsageCounts>>();
  private lastPrune = 0;

  constructor(
    readonly retentionMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  count(keyId: string, outcome: HistoryOutcome, units: number, at: number): void {
    const hour = at - (at % HOUR_MS);
    let hours = this.keys.get(keyId);
    if (!hours) {
      hours = new Map();
      this.keys.set(keyId, hours);
    }
    let counts = hours.get(hour);
    if (!counts) {
      counts = emptyCounts();
      hours.set(hour, counts);
    }
    counts[outcome]++;
    counts.units += units;
    this.prune(at);
  }

  /** Hours past the retention go, at most once an hour. */
  private prune(at: number): void {
    if (at - this.lastPrune < HOUR_MS) return;
    this.lastPrune = at;
    const oldest = at - this.retentionMs;
    for (const [keyId, hours] of this.keys) {
      for (const hour of hours.keys()) if (hour + HOUR_MS <= oldest) hours.delete(hour);
      if (hours.size === 0) this.keys.delete(keyId);
    }
  }

  async hours(keyId: string, from: number, to: number): Promise<HourUsage[]> {
    const oldest = this.now() - this.retentionMs;
    const out: HourUsage[] = [];
    for (const [hour, counts] of this.keys.get(keyId) ?? []) {
      if (hour >= from && hour < to && hour + HOUR_MS > oldest) out.push({ hour, ...counts });
    }
    return out.sort((a, b) => a.hour - b.hour);
  }

  async activeKeys(from: number, to: number): Promise<string[]> {
    const days = new Set(daysTouched(from, to));
    const out: string[] = [];
    for (const [keyId, hours] of this.keys) {
      for (const hour of hours.keys()) {
        if (days.has(Math.floor(hour / DAY_MS))) {
          out.push(keyId);
          break;
        }
      }
    }
    return out;
  }

  async flush(): Promise<void> {}
}
