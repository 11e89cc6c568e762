import type { Redis, Result } from 'ioredis';
import { BadCursorError, type Page, type PageRequest } from '../paging/page.js';
import type { RedisClient } from '../redis/clients.js';
import { FencedWrites } from '../redis/fenced-writes.js';
import {
  type CreditAddResult,
  type CreditBalance,
  type CreditChange,
  type CreditEntry,
  type CreditEntryType,
  type CreditLedger,
  DEFAULT_LEDGER_RETENTION_MS,
  ENTRY_ID,
  entryBefore,
  HOUR_MS,
  openingEntry,
  type RefundOnce,
  TRIM_BATCH,
} from './credit-ledger.js';
import { CREDIT_ADD_SCRIPT, CREDIT_BALANCE_SCRIPT, CREDIT_REFUND_SCRIPT } from './credit-script.js';
import { type CreditRule, refillPeriod } from './credit-terms.js';

type Reply = Array<string | number>;
type StreamEntry = [string, string[]];

declare module 'ioredis' {
  interface RedisCommander<Context> {
    creditAdd(numKeys: number, ...keysAndArgs: Array<string | number>): Result<Reply, Context>;
    creditBalance(numKeys: number, ...keysAndArgs: Array<string | number>): Result<Reply, Context>;
    creditRefund(numKeys: number, ...keysAndArgs: Array<string | number>): Result<Reply, Context>;
  }
}

/**
 * A balance's two keys, in its owner's Cluster slot (the customer's hash tag, or a lone key's own),
 * so the limit script reaches them with the windows: the state hash and the ledger stream.
 */
export function creditKeys(prefix: string, owner: string): [string, string] {
  return [`${prefix}{${owner}}:credits`, `${prefix}{${owner}}:credits:ledger`];
}

/** The refill arguments every credit script starts with, after `now`. */
function refillArgs(rule: CreditRule, now: number): [number, string] {
  return [rule.refill?.amount ?? 0, refillPeriod(rule, now)?.name ?? ''];
}

function entryOf([id, fields]: StreamEntry): CreditEntry {
  const f = new Map<string, string>();
  // Stryker disable next-line EqualityOperator: `<=` only adds an `undefined` key, never read
  for (let i = 0; i < fields.length; i += 2) f.set(fields[i] as string, fields[i + 1] as string);
  const entry: CreditEntry = {
    id,
    type: f.get('type') as CreditEntryType,
    amount: Number(f.get('amount')),
    at: Number(f.get('at')),
  };
  const end = f.get('end');
  if (end !== undefined) entry.end = Number(end);
  for (const field of ['period', 'reason', 'ref'] as const) {
    const value = f.get(field);
    if (value !== undefined) entry[field] = value;
  }
  return entry;
}

/** Balances and ledgers in Redis, shared by every replica and spent by the limit script. */
export class RedisCreditLedger implements CreditLedger {
  /** Changes by hand are fenced: one answered 503 never lands later (redis/fenced-writes.ts). */
  private readonly fences: FencedWrites;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    /** Entries written longer ago are carried into the opening entry (CREDITS_LEDGER_DAYS). */
    private readonly retentionMs = DEFAULT_LEDGER_RETENTION_MS,
  ) {
    const commands: Array<[string, string]> = [
      ['creditAdd', CREDIT_ADD_SCRIPT],
      ['creditBalance', CREDIT_BALANCE_SCRIPT],
      ['creditRefund', CREDIT_REFUND_SCRIPT],
    ];
    for (const [name, lua] of commands) {
      // Stryker disable next-line ConditionalExpression: defining a script again defines the same one
      if (typeof (redis as unknown as Record<string, unknown>)[name] !== 'function') {
        (redis as Redis).defineCommand(name, { lua });
      }
    }
    this.fences = new FencedWrites(redis);
  }

  async balance(owner: string, rule: CreditRule, now: number): Promise<CreditBalance> {
    const reply = await this.redis.creditBalance(
      2,
      ...creditKeys(this.prefix, owner),
      now,
      ...refillArgs(rule, now),
      now - this.retentionMs,
      TRIM_BATCH,
    );
    const spent = Number(reply[1]);
    return {
      balance: Number(reply[0]),
      openHour: spent > 0 ? { start: Number(reply[2]) * HOUR_MS, spent } : null,
      refilled: Number(reply[3]),
    };
  }

  async add(owner: string, rule: CreditRule, change: CreditChange, now: number): Promise<CreditAddResult> {
    const keys = creditKeys(this.prefix, owner);
    const reply = await this.fences.run(keys[0], (deadline) =>
      this.redis.creditAdd(
        2,
        ...keys,
        now,
        ...refillArgs(rule, now),
        change.ref,
        change.type,
        change.amount,
        change.reason,
        change.at,
        now - this.retentionMs,
        TRIM_BATCH,
        deadline,
      ),
    );
    const outcome = String(reply[0]) as CreditAddResult['outcome'];
    const balance = Number(reply[2]);
    const refilled = Number(reply[3]);
    if (outcome === 'short') return { outcome, balance, refilled };
    const exhausted = Number(reply[4]) === 1 ? { exhausted: true as const } : {};
    const raisedTo = Number(reply[5]) > 0 ? { raisedTo: Number(reply[5]) } : {};
    return { outcome, entryId: String(reply[1]), balance, refilled, ...exhausted, ...raisedTo };
  }

  /**
   * Fenced, so that a refund that failed can be spooled and written once later (CreditRefunds):
   * the one that failed never lands.
   */
  async refund(
    owner: string,
    rule: CreditRule,
    hour: number,
    units: number,
    now: number,
    once?: RefundOnce,
  ): Promise<number> {
    const keys: string[] = creditKeys(this.prefix, owner);
    if (once) keys.push(`${keys[0]}:refund:${once.ref}`);
    const reply = await this.fences.run(keys[0] as string, (deadline) =>
      this.redis.creditRefund(
        keys.length,
        ...keys,
        now,
        ...refillArgs(rule, now),
        Math.floor(hour / HOUR_MS),
        units,
        deadline,
        ...(once ? [once.keepUntil] : []),
      ),
    );
    return Number(reply[0]);
  }

  async page(owner: string, request: PageRequest): Promise<Page<CreditEntry>> {
    if (request.after !== undefined && !ENTRY_ID.test(request.after)) throw new BadCursorError();
    const from = request.after === undefined ? '+' : `(${request.after}`;
    // One more than asked: whether there is a next page. With the opening, read in the same
    // transaction, so a trim cannot fall between the two and count an entry twice.
    const [hash, stream] = creditKeys(this.prefix, owner);
    const replies = await this.redis
      .multi()
      .xrevrange(stream, from, '-', 'COUNT', request.limit + 1)
      .hmget(hash, 'o', 'oi')
      .exec();
    const failed = replies?.find(([err]) => err)?.[0];
    // Stryker disable next-line StringLiteral: exec() answers null only for an aborted WATCH, and there is none
    if (!replies || failed) throw failed ?? new Error('the ledger page transaction was aborted');
    const entries = (replies[0]?.[1] ?? []) as StreamEntry[];
    const [amount, openingId] = (replies[1]?.[1] ?? [null, null]) as [string | null, string | null];
    const items = entries.slice(0, request.limit).map(entryOf);
    if (entries.length > request.limit) return { items, next: items[items.length - 1]?.id ?? null };
    // The stream is read to its end: the opening comes last, once, unless the cursor is past it.
    if (openingId === null || (request.after !== undefined && !entryBefore(openingId, request.after))) {
      return { items, next: null };
    }
    if (items.length === request.limit) return { items, next: items[items.length - 1]?.id ?? null };
    return { items: [...items, openingEntry(openingId, Number(amount ?? 0))], next: null };
  }
}
