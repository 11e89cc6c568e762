/**
 * Per key and per hour: what the limiter decided. Support answers "why was I refused
 * yesterday at 15:00?" and billing "how much did this customer use last month?" from it.
 */
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

/**
 * The start of the history's hour holding `at`. A UTC hour (`shiftMs` 0) for keys without a
 * customer and customers in zones a whole number of hours from UTC; for a customer in a zone a
 * part-hour off UTC, and its keys, the zone's local hour: `shiftMs` past the UTC hour (30 minutes
 * in India, 15 in Nepal; calendar.ts hourShiftMs). Its local midnights and anchor days then fall
 * on the start of an hour, so its days and billing periods are exact sums of its hours.
 */
export function hourStart(at: number, shiftMs = 0): number {
  const since = at - shiftMs;
  return since - (((since % HOUR_MS) + HOUR_MS) % HOUR_MS) + shiftMs;
}

export type HistoryOutcome = 'admitted' | 'limited' | 'banned' | 'outOfCredits' | 'forbidden';

/** One hour (or day) of one key, as it is reported. `refused` is not stored: limited + banned (the 429s). */
export interface UsageCounts {
  /** Admitted and served: the upstream answered (a 502, 503 or 504 is upstreamFailed instead). */
  admitted: number;
  /** Refused by a window's limit (429 rate_limit_exceeded; in shadow mode, let through). */
  limited: number;
  /** Refused by a ban (429 api_key_banned). */
  banned: number;
  /**
   * Refused for want of credits (402 credits_exhausted), taking nothing: apart from the 429s, since
   * waiting does not end it and paying does, so an operator reading the counts knows whom to call.
   */
  outOfCredits: number;
  /** A scope or address the key lacks (403), at no cost. */
  forbidden: number;
  /** Units the served requests cost (a request costs 1 unless its route says more): what is billed. */
  units: number;
  /**
   * Admitted, then never served: the pets service could not be reached, timed out or said it
   * could not serve (502, 503, 504). Their cost still counted against the key's limits (the
   * limiter decided before the upstream answered); they are not billed.
   */
  upstreamFailed: number;
}

/**
 * What is stored: every admission as the limiter counted it (`admitted`, `units`, written with
 * its decision), and apart from them the admissions that then failed upstream and their units,
 * written once the answer is known. Reported counts are the difference (reported).
 */
export interface StoredCounts extends Omit<UsageCounts, 'upstreamFailed'> {
  upstreamFailed: number;
  upstreamFailedUnits: number;
}

/**
 * A customer's history is kept under its own id, as a key's is (the shared limiter writes both in
 * one call); the two are told apart by the id alone, so each day's index of active ids can be
 * split without asking a store: `cus_…` ids are customers, every other id is a key.
 */
const CUSTOMER_ID_PREFIX = 'cus_';

export const isCustomerId = (id: string): boolean => id.startsWith(CUSTOMER_ID_PREFIX);

/** One hour of one customer (or key) by route: the units its served requests cost on each. */
export interface RouteHour {
  /** The hour's start, epoch ms, as HourUsage's. */
  hour: number;
  /** `GET /v1/pets` (proxied-routes.ts routeName) → units; routes with none left out. */
  routes: Record<string, number>;
}

export interface HourUsage extends UsageCounts {
  /** The hour's start, epoch ms: a UTC hour's, or a local hour's past it (see hourStart). */
  hour: number;
}

/** The UTC days (days since the epoch) that [from, to) touches, oldest first. */
export function daysTouched(from: number, to: number): number[] {
  const days: number[] = [];
  for (let day = Math.floor(from / DAY_MS); day * DAY_MS < to; day++) days.push(day);
  return days;
}

export function emptyCounts(): UsageCounts {
  return { admitted: 0, limited: 0, banned: 0, outOfCredits: 0, forbidden: 0, units: 0, upstreamFailed: 0 };
}

export function emptyStored(): StoredCounts {
  return {
    admitted: 0,
    limited: 0,
    banned: 0,
    outOfCredits: 0,
    forbidden: 0,
    units: 0,
    upstreamFailed: 0,
    upstreamFailedUnits: 0,
  };
}

export function addCounts(into: UsageCounts, from: UsageCounts): void {
  into.admitted += from.admitted;
  into.limited += from.limited;
  into.banned += from.banned;
  into.outOfCredits += from.outOfCredits;
  into.forbidden += from.forbidden;
  into.units += from.units;
  into.upstreamFailed += from.upstreamFailed;
}

/**
 * An hour's stored counts as reported: the failed admissions taken out of the admitted and
 * their units out of the billed. Never below zero: a failure is counted in the hour of its
 * admission (the caller passes the decision's time), but a decision a millisecond before the hour
 * could still be counted in the one before.
 */
export function reported(stored: StoredCounts): UsageCounts {
  return {
    admitted: Math.max(0, stored.admitted - stored.upstreamFailed),
    limited: stored.limited,
    banned: stored.banned,
    outOfCredits: stored.outOfCredits,
    forbidden: stored.forbidden,
    units: Math.max(0, stored.units - stored.upstreamFailedUnits),
    upstreamFailed: stored.upstreamFailed,
  };
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
  /**
   * A decision at `at`, in the hour hourStart(at, shiftMs) names (the policy's hourShiftMs).
   * `customerId`: a decision the limiter took for a key of that customer, kept where the Redis
   * limit script keeps its own, in the customer's slot for the key (RedisUsageHistory.dayKey), so
   * that the key, should it stand for itself again, is not billed for them a second time.
   */
  count(keyId: string, outcome: HistoryOutcome, units: number, at: number, shiftMs?: number, customerId?: string): void;
  /**
   * A decision counted (as `count` would, or by the limit script) that no client was answered
   * with: taken back out, so the hour holds the answers given. The shared limiter's call whose
   * reply came after the command timeout, when the request had been answered without it.
   */
  uncount(
    keyId: string,
    outcome: HistoryOutcome,
    units: number,
    at: number,
    shiftMs?: number,
    customerId?: string,
  ): void;
  /**
   * An admitted request (counted with `units` at `admittedAt`, in the hour of `shiftMs`) that the
   * upstream then did not serve: reported as upstreamFailed, not admitted, and its units not billed.
   */
  upstreamFailed(keyId: string, units: number, admittedAt: number, shiftMs?: number): void;
  /**
   * An admitted request the upstream served, by route, for the metering export (metering/): its
   * units in the hour of its admission, under `id` (the customer, or a key without one). Written
   * when the answer is known, as upstreamFailed is, so a route's units are the served ones and
   * need no subtraction. Sums to `units` of the same hour (the closer's remainder names a gap).
   */
  served(id: string, route: string, units: number, admittedAt: number, shiftMs?: number): void;
  /** The hours of `id` starting in [from, to) with served units by route, oldest first. */
  routeHours(id: string, from: number, to: number): Promise<RouteHour[]>;
  /**
   * The key's hours starting in [from, to) (epoch ms) that hold anything, each as it was kept:
   * a UTC hour, or a local hour of its customer's zone (hourStart).
   * `customerId`: the key's customer, whose slot keeps the key's hours since it joined it.
   */
  hours(keyId: string, from: number, to: number, customerId?: string): Promise<HourUsage[]>;
  /** Every key with an hour holding a decision that starts in the UTC days [from, to) touches. */
  activeKeys(from: number, to: number): Promise<string[]>;
  /**
   * Every customer (an id `cus_…`, see isCustomerId) with an hour holding a decision for one of
   * its keys that starts in the UTC days [from, to) touches; kept as long as the hours are.
   */
  activeCustomers(from: number, to: number): Promise<string[]>;
  /** Writes what `count` buffered (RedisUsageHistory); called on close. */
  flush(): Promise<void>;
}

/** Where MemoryUsageHistory keeps a key's hours: under its id, or as a customer's, under both ids. */
const slotOf = (keyId: string, customerId?: string): string =>
  customerId === undefined ? keyId : `${customerId}\n${keyId}`;

/** The embedded mode's history: this process only, lost with it. */
export class MemoryUsageHistory implements UsageHistory {
  readonly kind = 'memory';
  /** Key (or customer) id, or a key's slot under its customer (slotOf) → hour start → counts. */
  private readonly keys = new Map<string, Map<number, StoredCounts>>();
  /** Id → hour start → route → served units. */
  private readonly routes = new Map<string, Map<number, Map<string, number>>>();
  private lastPrune = 0;

  constructor(
    readonly retentionMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  count(keyId: string, outcome: HistoryOutcome, units: number, at: number, shiftMs = 0, customerId?: string): void {
    const counts = this.hourOf(slotOf(keyId, customerId), hourStart(at, shiftMs));
    counts[outcome]++;
    counts.units += units;
    this.prune(at);
  }

  uncount(keyId: string, outcome: HistoryOutcome, units: number, at: number, shiftMs = 0, customerId?: string): void {
    const counts = this.hourOf(slotOf(keyId, customerId), hourStart(at, shiftMs));
    counts[outcome]--;
    counts.units -= units;
  }

  upstreamFailed(keyId: string, units: number, admittedAt: number, shiftMs = 0): void {
    const counts = this.hourOf(keyId, hourStart(admittedAt, shiftMs));
    counts.upstreamFailed++;
    counts.upstreamFailedUnits += units;
  }

  served(id: string, route: string, units: number, admittedAt: number, shiftMs = 0): void {
    const hour = hourStart(admittedAt, shiftMs);
    let hours = this.routes.get(id);
    if (!hours) {
      hours = new Map();
      this.routes.set(id, hours);
    }
    let byRoute = hours.get(hour);
    if (!byRoute) {
      byRoute = new Map();
      hours.set(hour, byRoute);
    }
    byRoute.set(route, (byRoute.get(route) ?? 0) + units);
  }

  async routeHours(id: string, from: number, to: number): Promise<RouteHour[]> {
    const oldest = this.now() - this.retentionMs;
    const out: RouteHour[] = [];
    for (const [hour, byRoute] of this.routes.get(id) ?? []) {
      if (hour >= from && hour < to && hour + HOUR_MS > oldest) out.push({ hour, routes: Object.fromEntries(byRoute) });
    }
    return out.sort((a, b) => a.hour - b.hour);
  }

  private hourOf(keyId: string, hour: number): StoredCounts {
    let hours = this.keys.get(keyId);
    if (!hours) {
      hours = new Map();
      this.keys.set(keyId, hours);
    }
    let counts = hours.get(hour);
    if (!counts) {
      counts = emptyStored();
      hours.set(hour, counts);
    }
    return counts;
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
    for (const [id, hours] of this.routes) {
      for (const hour of hours.keys()) if (hour + HOUR_MS <= oldest) hours.delete(hour);
      if (hours.size === 0) this.routes.delete(id);
    }
  }

  /** A key's own hours, and with its customer its hours as the customer's too, summed (as Redis's). */
  async hours(keyId: string, from: number, to: number, customerId?: string): Promise<HourUsage[]> {
    const oldest = this.now() - this.retentionMs;
    const byHour = new Map<number, StoredCounts>();
    const slots = customerId === undefined ? [keyId] : [keyId, slotOf(keyId, customerId)];
    for (const slot of slots) {
      for (const [hour, counts] of this.keys.get(slot) ?? []) {
        if (hour < from || hour >= to || hour + HOUR_MS <= oldest) continue;
        const sum = byHour.get(hour) ?? emptyStored();
        for (const name of Object.keys(sum) as Array<keyof StoredCounts>) sum[name] += counts[name];
        byHour.set(hour, sum);
      }
    }
    return [...byHour].map(([hour, counts]) => ({ hour, ...reported(counts) })).sort((a, b) => a.hour - b.hour);
  }

  async activeKeys(from: number, to: number): Promise<string[]> {
    return this.activeIds(from, to, false);
  }

  async activeCustomers(from: number, to: number): Promise<string[]> {
    return this.activeIds(from, to, true);
  }

  /** The ids of one kind with an hour in the days [from, to) touches, none past the retention. */
  private activeIds(from: number, to: number, customers: boolean): string[] {
    const days = new Set(daysTouched(from, to));
    const oldest = this.now() - this.retentionMs;
    const out = new Set<string>();
    for (const [slot, hours] of this.keys) {
      // A key's slot under its customer makes the key active, as its own does.
      const id = slot.slice(slot.indexOf('\n') + 1);
      if (isCustomerId(id) !== customers || out.has(id)) continue;
      for (const hour of hours.keys()) {
        if (days.has(Math.floor(hour / DAY_MS)) && hour + HOUR_MS > oldest) {
          out.add(id);
          break;
        }
      }
    }
    return [...out];
  }

  async flush(): Promise<void> {}
}
