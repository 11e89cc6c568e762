import type { LimitPolicy, WindowRule } from '../limits/policy.js';
import { ruleEnd } from '../limits/policy.js';

/**
 * One count as regions exchange it: subject (`k:<key>` or `c:<customer>`), window name, the
 * window's id (a calendar period's start, else the index of its aligned length since the epoch),
 * what the sender admitted in it, and when the count may be forgotten (epoch ms).
 */
export type CountEntry = [subject: string, window: string, windowId: number, count: number, endsAt: number];

/** What a source (one gateway process of a region) publishes each interval: all its live counts. */
export interface CountsMessage {
  region: string;
  source: string;
  entries: CountEntry[];
}

/** One region as this one sees it (GET /admin/regions). */
export interface RegionView {
  region: string;
  /** Ms since a message of that region last arrived here. */
  lastSyncAgeMs: number;
  partitioned: boolean;
}

export interface RegionsStatus {
  region: string;
  connected: boolean;
  /** Whether this region enforces shares now: NATS away, or a region not heard from for staleMs. */
  partitioned: boolean;
  /** The share of a window enforced while partitioned. */
  share: number;
  /** Windows (subject and window) that a share refused or bounded since the partition began. */
  sharesInForce: number;
  regions: RegionView[];
}

export interface RegionCountsOptions {
  region: string;
  /** This process's name among its region's gateways: each publishes its own counts. */
  source: string;
  staleMs: number;
  /** REGION_SHARE; null: 1 / the regions seen. */
  share: number | null;
}

const entryKey = (subject: string, window: string, windowId: number): string =>
  `${subject}\u0000${window}\u0000${windowId}`;

/** The subject a window counts under: its customer's for a shared window, else the key's. */
function subjectOf(rule: WindowRule, keyId: string, customerId: string | undefined): string {
  return rule.scope === 'customer' && customerId !== undefined ? `c:${customerId}` : `k:${keyId}`;
}

/**
 * Where a window's count lives in the exchange: calendar windows by their period (the same in every
 * region), rolling ones by their length aligned to the epoch, kept one length more so that the
 * previous aligned window can still be weighed in (remoteUsed).
 */
function windowSlot(rule: WindowRule, now: number): { id: number; endsAt: number } {
  if (rule.kind === 'calendar') return { id: rule.calendar.start(rule.name, now), endsAt: ruleEnd(rule, now) };
  const id = Math.floor(now / rule.lengthMs);
  return { id, endsAt: (id + 2) * rule.lengthMs };
}

/**
 * The counts of every region as this one knows them: its own (what this process admitted, per
 * subject and window, grow-only within a window) and the others' last published ones. A source's
 * count only grows within a window, so the highest seen is its last: a repeated or reordered
 * message changes nothing and a lost one is made good by the next (each carries all live counts).
 * The merge over sources and regions is a sum.
 */
export class RegionCounts {
  readonly region: string;
  readonly source: string;
  /** Whether the NATS connection is up: while it is not, every other region is as good as unheard. */
  connected = false;
  private readonly own = new Map<string, CountEntry>();
  /** Per remote source: its region and counts. */
  private readonly sources = new Map<string, { region: string; entries: Map<string, CountEntry> }>();
  /** The other regions' counts summed, by entry key. */
  private readonly remote = new Map<string, number>();
  /** When each other region was last heard (this process's clock). */
  private readonly heard = new Map<string, number>();
  /** Subject-window pairs a share bounded during the current partition, and when last. */
  private readonly shares = new Map<string, number>();
  /** This process's count of a window when the partition first met it (its share is of what was left then). */
  private readonly atPartition = new Map<string, number>();

  constructor(
    private readonly options: RegionCountsOptions,
    private readonly now: () => number,
  ) {
    this.region = options.region;
    this.source = options.source;
  }

  /** The regions this one knows of, itself included. */
  regionCount(): number {
    return 1 + this.heard.size;
  }

  /** Whether shares are in force: NATS away, or a region known here not heard from for staleMs. */
  partitioned(now = this.now()): boolean {
    if (this.heard.size === 0) return false;
    if (!this.connected) return true;
    for (const at of this.heard.values()) if (now - at > this.options.staleMs) return true;
    return false;
  }

  /** The share of a window this region may fill while partitioned. */
  shareFraction(): number {
    return this.options.share ?? 1 / this.regionCount();
  }

  /**
   * What the other regions admitted in a window as this one knows it. A rolling window's local
   * count covers its last length, which straddles two aligned windows: the previous one is weighed
   * by the part of it still inside (rounded up, so the estimate errs towards refusing).
   */
  remoteUsed(subject: string, rule: WindowRule, now: number): number {
    if (this.remote.size === 0) return 0;
    const { id } = windowSlot(rule, now);
    const current = this.remote.get(entryKey(subject, rule.name, id)) ?? 0;
    if (rule.kind === 'calendar') return current;
    const previous = this.remote.get(entryKey(subject, rule.name, id - 1)) ?? 0;
    const inside = 1 - (now - id * rule.lengthMs) / rule.lengthMs;
    return current + Math.ceil(previous * inside);
  }

  /**
   * The policy as this region enforces it now: each window's limit less what the other regions
   * admitted in it, and while partitioned at most the region's share of the limit. The policy
   * itself when nothing changes (the common case with no remote traffic: nothing is allocated).
   */
  adjust(keyId: string, customerId: string | undefined, policy: LimitPolicy, now: number): LimitPolicy {
    const partitioned = this.partitioned(now);
    if (!partitioned && this.atPartition.size > 0) this.atPartition.clear();
    if (this.remote.size === 0 && !partitioned) return policy;
    let windows: WindowRule[] | null = null;
    const rules = policy.windows;
    for (let w = 0; w < rules.length; w++) {
      const rule = rules[w] as WindowRule;
      const subject = subjectOf(rule, keyId, customerId);
      const remote = this.remoteUsed(subject, rule, now);
      let limit = Math.max(0, rule.limit - remote);
      if (partitioned) {
        const share = this.shareCap(subject, rule, remote, now);
        if (share < limit) {
          limit = share;
          this.shares.set(`${subject}\u0000${rule.name}`, now);
        }
      }
      if (limit === rule.limit) continue;
      windows ??= rules.slice();
      windows[w] = { ...rule, limit };
    }
    return windows ? { ...policy, windows } : policy;
  }

  /**
   * The most this region's count of a window may reach while partitioned: what it had when the
   * partition first met the window, plus its share of what was left then (the limit less its own
   * count and the other regions' last known). The shares of what was left sum to at most what was
   * left, whatever each region had taken before, so a partition admits at most the limit plus what
   * no region had heard of when it began. Its own count is this process's: with several gateways in
   * a region it is less than the region's, which only lowers the cap.
   */
  private shareCap(subject: string, rule: WindowRule, remote: number, now: number): number {
    const key = entryKey(subject, rule.name, windowSlot(rule, now).id);
    let before = this.atPartition.get(key);
    if (before === undefined) {
      before = this.own.get(key)?.[3] ?? 0;
      this.atPartition.set(key, before);
    }
    return before + Math.floor(this.shareFraction() * Math.max(0, rule.limit - before - remote));
  }

  /** Counts what this process admitted: `cost` in every window of the policy. */
  record(keyId: string, customerId: string | undefined, policy: LimitPolicy, cost: number, now: number): void {
    for (const rule of policy.windows) {
      const subject = subjectOf(rule, keyId, customerId);
      const { id, endsAt } = windowSlot(rule, now);
      const key = entryKey(subject, rule.name, id);
      const entry = this.own.get(key);
      if (entry) entry[3] += cost;
      else this.own.set(key, [subject, rule.name, id, cost, endsAt]);
    }
  }

  /** This process's live counts, to publish; ended windows are forgotten here, own and remote. */
  snapshot(now = this.now()): CountsMessage {
    this.prune(now);
    return { region: this.region, source: this.source, entries: [...this.own.values()] };
  }

  /** Another source's counts. Its own region's other gateways are already in its Redis: skipped. */
  receive(message: CountsMessage, now = this.now()): void {
    if (message.region === this.region) return;
    this.heard.set(message.region, now);
    let source = this.sources.get(message.source);
    if (!source) {
      source = { region: message.region, entries: new Map() };
      this.sources.set(message.source, source);
    }
    for (const entry of message.entries) {
      const [subject, window, windowId, count, endsAt] = entry;
      if (!(count > 0) || endsAt <= now) continue;
      const key = entryKey(subject, window, windowId);
      const known = source.entries.get(key);
      const before = known?.[3] ?? 0;
      if (count <= before) continue;
      source.entries.set(key, [subject, window, windowId, count, endsAt]);
      this.remote.set(key, (this.remote.get(key) ?? 0) + count - before);
    }
  }

  /** The other regions' counts summed, one line per subject, window and window id (tests, the admin view). */
  remoteCount(subject: string, window: string, windowId: number): number {
    return this.remote.get(entryKey(subject, window, windowId)) ?? 0;
  }

  /** This process's own count (tests and convergence checks). */
  ownCount(subject: string, window: string, windowId: number): number {
    return this.own.get(entryKey(subject, window, windowId))?.[3] ?? 0;
  }

  status(now = this.now()): RegionsStatus {
    const partitioned = this.partitioned(now);
    // A share ends with the partition: what was bounded then is not bounded now.
    if (!partitioned) this.shares.clear();
    const regions = [...this.heard]
      .map(([region, at]) => ({
        region,
        lastSyncAgeMs: Math.max(0, now - at),
        partitioned: !this.connected || now - at > this.options.staleMs,
      }))
      .sort((a, b) => a.region.localeCompare(b.region));
    return {
      region: this.region,
      connected: this.connected,
      partitioned,
      share: this.shareFraction(),
      sharesInForce: this.shares.size,
      regions,
    };
  }

  private prune(now: number): void {
    for (const [key, entry] of this.own) if (entry[4] <= now) this.own.delete(key);
    for (const source of this.sources.values()) {
      for (const [key, entry] of source.entries) {
        if (entry[4] > now) continue;
        source.entries.delete(key);
        const left = (this.remote.get(key) ?? 0) - entry[3];
        if (left > 0) this.remote.set(key, left);
        else this.remote.delete(key);
      }
    }
  }
}
