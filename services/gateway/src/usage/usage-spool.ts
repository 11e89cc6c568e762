import { randomUUID } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readdirSync, renameSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { type HistoryOutcome, hourStart, type UsageHistory } from './usage-history.js';

/** One decision taken while the shared history could not be written (UsageHistory.count's arguments). */
export interface DecisionRecord {
  /** The key's (or customer's) id. */
  id: string;
  /** count's customerId: a key's hours kept in its customer's slot. */
  customerId?: string;
  outcome: HistoryOutcome;
  units: number;
  /** The hour's start (hourStart of the decision's time and shift). */
  hour: number;
}

/**
 * Counts a write-behind batch could not write into one hour of a day's hash (RedisUsageHistory):
 * the fields' suffixes after the hour's name (`x`, `y`, `|GET /v1/pets`) and what to add to each.
 */
export interface FieldsRecord {
  kind: 'fields';
  id: string;
  customerId?: string;
  hour: number;
  fields: Record<string, number>;
}

/** Credits of unserved requests not given back while Redis was away (CreditRefunds), under a reference of their own. */
export interface RefundRecord {
  kind: 'refund';
  owner: string;
  /** The UTC hour's start the requests were admitted in. */
  hour: number;
  units: number;
  /** Given back once under it, whoever replays it and however often (CreditLedger.refund's `once`). */
  ref: string;
}

export type SpoolRecord = DecisionRecord | FieldsRecord | RefundRecord;

/**
 * Records sealed under one id: written into the history once, whoever replays them and however
 * often (RedisUsageHistory.replay marks each segment's id in every hash it adds to).
 */
export interface SpoolSegment {
  id: string;
  records: SpoolRecord[];
}

/** Where spooled records wait: this process's memory, or files that outlive it. */
export interface SpoolStore {
  readonly kind: 'memory' | 'files';
  append(record: SpoolRecord): void;
  /** Closes the open segment, if any: what is appended next starts a new one. */
  seal(): void;
  /** The sealed segments, oldest first. */
  sealed(): Promise<SpoolSegment[]>;
  /** A segment written into the history: gone for good. */
  remove(id: string): Promise<void>;
  /** How many records wait (sealed or not), for the log. */
  size(): number;
}

/** Sortable by when it was opened, unique across replicas. */
const segmentId = (): string => `${Date.now().toString(36).padStart(9, '0')}-${randomUUID()}`;

export class MemorySpoolStore implements SpoolStore {
  readonly kind = 'memory';
  private open: SpoolSegment | null = null;
  private readonly done: SpoolSegment[] = [];

  append(record: SpoolRecord): void {
    this.open ??= { id: segmentId(), records: [] };
    this.open.records.push(record);
  }

  seal(): void {
    if (this.open) this.done.push(this.open);
    this.open = null;
  }

  async sealed(): Promise<SpoolSegment[]> {
    return [...this.done];
  }

  async remove(id: string): Promise<void> {
    const at = this.done.findIndex((s) => s.id === id);
    if (at >= 0) this.done.splice(at, 1);
  }

  size(): number {
    return this.done.reduce((n, s) => n + s.records.length, this.open?.records.length ?? 0);
  }
}

const OPEN = '.open';
const SEALED = '.spool';

/**
 * One file per segment in a directory of this replica's own (USAGE_SPOOL_DIR): `<id>.open` while
 * records are appended, one JSON line each, written before the request is answered (a write to
 * the page cache: a killed process loses none of it); renamed `<id>.spool` when sealed. A replica
 * starting seals the `.open` files it finds: its predecessor's, which died before sealing them.
 */
export class FileSpoolStore implements SpoolStore {
  readonly kind = 'files';
  private open: { id: string; fd: number; records: number } | null = null;
  /** Records per sealed segment, as last read. */
  private readonly counts = new Map<string, number>();

  constructor(private readonly dir: string) {
    mkdirSync(dir, { recursive: true });
    for (const name of readdirSync(dir)) {
      if (name.endsWith(OPEN)) renameSync(join(dir, name), join(dir, `${name.slice(0, -OPEN.length)}${SEALED}`));
    }
    // Written to now, rather than at the first outage: a directory that cannot be written stops the start.
    writeFileSync(join(dir, '.probe'), '');
    unlinkSync(join(dir, '.probe'));
  }

  append(record: SpoolRecord): void {
    if (!this.open) {
      const id = segmentId();
      this.open = { id, fd: openSync(join(this.dir, `${id}${OPEN}`), 'a'), records: 0 };
    }
    writeSync(this.open.fd, `${JSON.stringify(record)}\n`);
    this.open.records++;
  }

  seal(): void {
    if (!this.open) return;
    const { id, fd, records } = this.open;
    this.open = null;
    this.counts.set(id, records);
    closeSync(fd);
    renameSync(join(this.dir, `${id}${OPEN}`), join(this.dir, `${id}${SEALED}`));
  }

  async sealed(): Promise<SpoolSegment[]> {
    const names = readdirSync(this.dir)
      .filter((n) => n.endsWith(SEALED))
      .sort();
    const segments: SpoolSegment[] = [];
    for (const name of names) {
      let text: string;
      try {
        text = await readFile(join(this.dir, name), 'utf8');
      } catch (err) {
        // Replayed and removed meanwhile (a second replica on the directory): nothing left to do.
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw err;
      }
      const records: SpoolRecord[] = [];
      for (const line of text.split('\n')) {
        // A last line cut short by a crash is the one request it cannot keep.
        try {
          if (line !== '') records.push(JSON.parse(line) as SpoolRecord);
        } catch {}
      }
      const id = name.slice(0, -SEALED.length);
      this.counts.set(id, records.length);
      segments.push({ id, records });
    }
    return segments;
  }

  async remove(id: string): Promise<void> {
    await unlink(join(this.dir, `${id}${SEALED}`)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
    this.counts.delete(id);
  }

  size(): number {
    let n = this.open?.records ?? 0;
    for (const records of this.counts.values()) n += records;
    return n;
  }
}

/** How often the spool tries to write what waits while anything does. */
const REPLAY_EVERY_MS = 1_000;

export interface UsageSpoolOptions {
  store: SpoolStore;
  /** Writes a segment into the history, once per id whoever calls it (RedisUsageHistory.replay). */
  replay: (segment: SpoolSegment) => Promise<void>;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

/**
 * The decisions of the per-replica fallback (Redis failing), counted where the history cannot be
 * written, with the history's counts and the refunds whose writes failed meanwhile (fenced writes:
 * one that failed never lands later, redis/fenced-writes.ts), written once Redis answers again: every second while anything waits, the
 * open segment is sealed and every sealed one replayed, each under its id, so a segment replayed
 * twice (a timed-out replay that Redis applied, a replica dying between the write and the file's
 * removal, two replicas replaying one directory) counts once.
 */
export class UsageSpool implements Pick<UsageHistory, 'count'> {
  private timer: NodeJS.Timeout | null = null;
  private replaying: Promise<void> | null = null;
  private stopped = false;
  /** Whether the last replay failed: logged once an outage, not every second. */
  private failing = false;
  /** Gives spooled refunds back (CreditRefunds.replay), once each; set once the refunds exist. */
  private refunds: ((records: RefundRecord[]) => Promise<void>) | null = null;

  constructor(private readonly options: UsageSpoolOptions) {}

  /** Where a segment's refunds are given back: after its counts, under the same retries. */
  replayRefundsWith(refunds: (records: RefundRecord[]) => Promise<void>): void {
    this.refunds = refunds;
  }

  count(keyId: string, outcome: HistoryOutcome, units: number, at: number, shiftMs = 0, customerId?: string): void {
    this.append({
      id: keyId,
      ...(customerId !== undefined ? { customerId } : {}),
      outcome,
      units,
      hour: hourStart(at, shiftMs),
    });
  }

  /** What could not be written now (counts, refunds), to be written once Redis answers. */
  append(record: SpoolRecord): void {
    this.options.store.append(record);
    this.schedule();
  }

  /** Replays what a predecessor left (a file store), then whatever is spooled from now on. */
  start(): void {
    this.stopped = false;
    if (this.options.store.kind === 'files') this.schedule();
  }

  /** Seals and tries once more; what still waits stays in its files (or, in memory, is lost: logged). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.replay();
    const left = this.options.store.size();
    if (left > 0) {
      this.options.log.warn(
        { records: left, store: this.options.store.kind },
        this.options.store.kind === 'files'
          ? `usage spool: ${left} records (decisions, counts, refunds) not yet written stay in USAGE_SPOOL_DIR for the next start`
          : `usage spool: ${left} records (decisions, counts, refunds) kept while Redis was away are lost (set USAGE_SPOOL_DIR to keep them)`,
      );
    }
  }

  /** Seals the open segment and writes every sealed one; resolves once each is written or has failed. */
  replay(): Promise<void> {
    this.replaying ??= this.replayAll().finally(() => {
      this.replaying = null;
    });
    return this.replaying;
  }

  private async replayAll(): Promise<void> {
    const { store, replay, log } = this.options;
    store.seal();
    let written = 0;
    try {
      for (const segment of await store.sealed()) {
        await replay(segment);
        const refunds = segment.records.filter((r): r is RefundRecord => 'kind' in r && r.kind === 'refund');
        if (refunds.length > 0) {
          if (!this.refunds) throw new Error('usage spool: refunds to replay, and nothing to give them back');
          await this.refunds(refunds);
        }
        await store.remove(segment.id);
        written += segment.records.length;
      }
      if (this.failing || written > 0) log.info({ records: written }, 'usage spool: written into the usage history');
      this.failing = false;
    } catch (err) {
      if (!this.failing)
        log.warn({ err }, 'usage spool: the usage history cannot be written yet; retrying every second');
      this.failing = true;
    }
    if (store.size() > 0 || this.failing) this.schedule();
  }

  private schedule(): void {
    if (this.timer || this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.replay();
    }, REPLAY_EVERY_MS);
    this.timer.unref();
  }
}
