import { takeMarker } from '../replicas/markers.js';
import type { HourTotals, MeteringRecord } from './metering-event.js';

/** One page of the export: the records after a cursor, and the cursor to ask from next. */
export interface MeteringPage {
  records: MeteringRecord[];
  /** The position after the last record given (the `after` asked, when there was none). */
  next: string | null;
}

/** What record() appended: the hour's revision, and the units it adds to the one before. */
export interface Appended {
  revision: number;
  delta: number;
}

/** A cursor the store did not give (or of another store). */
export class BadCursorError extends Error {}

/**
 * The closed hours, in the order they were recorded. Positions are Redis stream ids
 * (`<ms>-<seq>`, the memory store's `<n>-0`), given out wrapped (cursorOf) so a consumer treats
 * them as opaque.
 */
export interface MeteringStore {
  readonly kind: 'redis' | 'memory';
  /**
   * Appends the hour as its next revision, unless its last one has the same units and routes:
   * the revision appended and its delta, or null. Atomic: of replicas recording the same totals at once, one
   * appends. An hour never recorded with 0 units is not appended (nothing to bill).
   */
  record(totals: HourTotals, at: number): Promise<Appended | null>;
  /** Up to `limit` records after the cursor (null: from the first kept), oldest first. */
  read(after: string | null, limit: number): Promise<MeteringPage>;
  /**
   * Whether this caller is the first to claim `name` in the last `ttlMs`: of replicas claiming it
   * at once, exactly one is (the closer's pass of a quarter hour runs on one replica).
   */
  claim(name: string, ttlMs: number): Promise<boolean>;
}

const CURSOR_PREFIX = 'm1:';

/** A store position as the opaque cursor the API gives. */
export function cursorOf(position: string): string {
  return Buffer.from(`${CURSOR_PREFIX}${position}`).toString('base64url');
}

/** The store position a cursor wraps; BadCursorError for anything the API did not give. */
export function positionOf(cursor: string): string {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const position = text.startsWith(CURSOR_PREFIX) ? text.slice(CURSOR_PREFIX.length) : '';
  if (!/^\d{1,20}-\d{1,20}$/.test(position) || cursorOf(position) !== cursor) {
    throw new BadCursorError(`after is not a cursor this export gave: "${cursor.slice(0, 64)}"`);
  }
  return position;
}

/** Units and routes in a canonical text: two totals are the same revision exactly when it is equal. */
export function totalsDigest(totals: HourTotals): string {
  const routes = Object.entries(totals.routes)
    .filter(([, units]) => units !== 0)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify([totals.units, routes]);
}

/** The embedded mode's export: this process only, lost with it (use Redis to keep it). */
export class MemoryMeteringStore implements MeteringStore {
  readonly kind = 'memory';
  private readonly records: MeteringRecord[] = [];
  /** `<subject>\n<hour>` → the last revision's number, digest and units. */
  private readonly last = new Map<string, { revision: number; digest: string; units: number }>();
  /** Claimed names → when the claim ends (ms, this process's clock). */
  private readonly claims = new Map<string, number>();

  async record(totals: HourTotals, at: number): Promise<Appended | null> {
    const id = `${totals.subject}\n${totals.hour}`;
    const digest = totalsDigest(totals);
    const last = this.last.get(id);
    if (last?.digest === digest || (!last && totals.units === 0)) return null;
    const revision = (last?.revision ?? 0) + 1;
    const delta = totals.units - (last?.units ?? 0);
    this.last.set(id, { revision, digest, units: totals.units });
    this.records.push({ ...totals, revision, delta, closedAt: at });
    return { revision, delta };
  }

  async read(after: string | null, limit: number): Promise<MeteringPage> {
    const from = after === null ? 0 : Number(positionOf(after).split('-')[0]);
    const records = this.records.slice(from, from + limit);
    const next = records.length > 0 ? cursorOf(`${from + records.length}-0`) : after;
    return { records, next };
  }
  async claim(name: string, ttlMs: number): Promise<boolean> {
    return takeMarker(this.claims, name, Date.now(), ttlMs);
  }
}
