import type { FastifyBaseLogger } from 'fastify';
import type { CustomerRecord } from '../customers/customer-store.js';
import type { KeyRecord } from '../keys/key-store.js';
import { HOUR_MS, isCustomerId, type UsageHistory } from '../usage/usage-history.js';
import type { HourTotals, MeteringRecord } from './metering-event.js';
import type { MeteringStore } from './metering-store.js';

/** The route a closed hour's units are given under when the routes' counts fall short of them. */
export const UNATTRIBUTED_ROUTE = 'unattributed';
/** How far back a pass looks for late corrections to closed hours. */
const LOOKBACK_MS = 48 * HOUR_MS;
/** Hours this replica has recorded as they are, kept to skip them on the next passes; cleared past this. */
const SEEN_MAX = 200_000;
/**
 * The grid hours end on: every time zone's offset is a whole number of quarter hours (India's
 * :30, Nepal's :45), so a customer's local hour ends on a quarter hour of UTC.
 */
const QUARTER_HOUR_MS = 15 * 60_000;

export interface CloserOptions {
  history: UsageHistory;
  store: MeteringStore;
  /** The customer store: a subject's externalId. */
  customers: { get(id: string): Promise<CustomerRecord | null> };
  /** A key by id (the key store, API_KEYS_FILE's first): a key of a customer is not a subject. */
  key(id: string): Promise<KeyRecord | null>;
  /** Told of every revision this replica appended (the `usage.reported` webhook). */
  onRecorded(record: MeteringRecord): void;
  /** METERING_CLOSE_DELAY_MS: an hour is closed this long after it ends. */
  closeDelayMs: number;
  now: () => number;
  logger: FastifyBaseLogger;
}

/**
 * Closes hours: every pass, each subject's hours that ended at least closeDelayMs ago (within
 * LOOKBACK_MS) are read from the usage history and recorded in the store, which appends a
 * revision only when the totals differ from the last (metering-store.ts), so a pass on every
 * replica appends each (subject, hour, revision) once, and a late change to a closed hour (an
 * upstream failure written late, an hour restated) becomes its next revision.
 */
export class MeteringCloser {
  private readonly seen = new Map<string, string>();
  /**
   * Key ids found to belong to a customer: their hours are not read again. Cleared with `seen`
   * every hour, so a key that leaves its customer is a subject again within the hour.
   */
  private readonly customersKeys = new Set<string>();
  private clearedFor = 0;
  /** The quarter hour up to which the timer's last pass closed (see tick). */
  private sweptTo: number | null = null;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<MeteringRecord[]> | null = null;

  constructor(private readonly options: CloserOptions) {}

  /** One pass now; the records this replica appended. Passes do not overlap. */
  closeDue(): Promise<MeteringRecord[]> {
    this.running ??= this.pass().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  /**
   * The timer's turn: a pass once a quarter hour of UTC has passed its close delay since the last
   * pass (an hour of some subject may have ended on it), else nothing. A pass reads every active
   * subject's hours over LOOKBACK_MS (two reads of up to three day hashes each): every minute, as
   * it first ran, 100,000 active keys cost each replica some 600,000 Redis reads a minute whether
   * an hour had closed or not. A late correction to a closed hour is reported by the next quarter's pass,
   * within 15 minutes; a pass that fails is tried again on the next turn.
   */
  async tick(): Promise<MeteringRecord[]> {
    const closable = Math.floor((this.options.now() - this.options.closeDelayMs) / QUARTER_HOUR_MS);
    if (closable === this.sweptTo) return [];
    // One replica's pass a quarter: the others' would read the same hours to append nothing. Should
    // it fail, that replica tries again on its next turn; should it die, the next quarter's pass
    // (whichever replica claims it) reads the same 48 hours.
    const mine = await this.options.store.claim(`pass:${closable}`, QUARTER_HOUR_MS);
    const appended = mine ? await this.closeDue() : [];
    this.sweptTo = closable;
    return appended;
  }

  /** A turn every minute (or every closeDelayMs, if shorter), unref'd. */
  start(): void {
    if (this.timer) return;
    const every = Math.max(1_000, Math.min(60_000, this.options.closeDelayMs));
    this.timer = setInterval(() => {
      this.tick().catch((err: unknown) => this.options.logger.warn({ err }, 'metering: a closing pass failed'));
    }, every);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running?.catch(() => undefined);
  }

  private async pass(): Promise<MeteringRecord[]> {
    const { history, now } = this.options;
    const at = now();
    if (at - this.clearedFor >= HOUR_MS || this.seen.size >= SEEN_MAX) {
      this.clearedFor = at;
      this.seen.clear();
      this.customersKeys.clear();
    }
    const closedBefore = at - this.options.closeDelayMs;
    const from = Math.max(closedBefore - LOOKBACK_MS, at - history.retentionMs);
    const [customers, keys] = await Promise.all([
      history.activeCustomers(from, closedBefore),
      history.activeKeys(from, closedBefore),
    ]);
    const appended: MeteringRecord[] = [];
    const lone = keys.filter((id) => !isCustomerId(id) && !this.customersKeys.has(id));
    for (const subject of [...customers, ...lone]) {
      for (const totals of await this.closedHours(subject, from, closedBefore)) {
        const record = await this.record(totals, at);
        if (record) appended.push(record);
      }
    }
    return appended;
  }

  /** The subject's hours that have ended by `closedBefore`, with units by route summing to the total. */
  private async closedHours(subject: string, from: number, closedBefore: number): Promise<HourTotals[]> {
    const { history } = this.options;
    const [hours, routeHours] = await Promise.all([
      history.hours(subject, from, closedBefore),
      history.routeHours(subject, from, closedBefore),
    ]);
    const routesOf = new Map(routeHours.map((h) => [h.hour, h.routes]));
    return hours
      .filter((h) => h.hour + HOUR_MS <= closedBefore)
      .map((h) => ({
        subject,
        hour: h.hour,
        units: h.units,
        routes: splitByRoute(h.units, routesOf.get(h.hour) ?? {}),
      }));
  }

  /** Records the hour unless this replica already recorded it as it is; the record appended, or null. */
  private async record(totals: HourTotals, at: number): Promise<MeteringRecord | null> {
    const id = `${totals.subject}\n${totals.hour}`;
    const digest = JSON.stringify([totals.units, totals.routes]);
    if (this.seen.get(id) === digest) return null;
    if (!(await this.isSubject(totals.subject))) {
      this.customersKeys.add(totals.subject);
      return null;
    }
    const externalId = isCustomerId(totals.subject)
      ? (await this.options.customers.get(totals.subject))?.externalId
      : undefined;
    const full = externalId ? { ...totals, externalId } : totals;
    const appended = await this.options.store.record(full, at);
    this.seen.set(id, digest);
    if (appended === null) return null;
    const record: MeteringRecord = { ...full, ...appended, closedAt: at };
    this.options.onRecorded(record);
    return record;
  }

  /** A customer, or a key that stands for itself (a key of a customer is billed as the customer). */
  private async isSubject(id: string): Promise<boolean> {
    if (isCustomerId(id)) return true;
    const key = await this.options.key(id);
    return key !== null && key.customerId === undefined;
  }
}

/**
 * The routes' units, with what they fall short of the history's total (a replica that died with
 * a second of route counts unwritten) under UNATTRIBUTED_ROUTE, and any excess taken off it: the
 * routes always sum to the total the invoice bills.
 */
export function splitByRoute(units: number, routes: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  let sum = 0;
  for (const [route, n] of Object.entries(routes)) {
    if (n > 0) out[route] = n;
    sum += Math.max(n, 0);
  }
  if (sum === units) return out;
  if (sum < units) {
    out[UNATTRIBUTED_ROUTE] = units - sum;
    return out;
  }
  // More by route than in total (counts from before a restatement): the smallest routes give way first.
  let excess = sum - units;
  for (const route of Object.keys(out).sort((a, b) => (out[a] as number) - (out[b] as number))) {
    const take = Math.min(excess, out[route] as number);
    out[route] = (out[route] as number) - take;
    excess -= take;
    if (out[route] === 0) delete out[route];
  }
  return out;
}
