import type { Page, PageRequest } from '../paging/page.js';
import type { CreditRule } from './credit-terms.js';

/**
 * The kinds of change a balance sees: `grant` (credits given, not bought), `topup` (bought),
 * `adjustment` (an operator's correction, either way), `refill` (the terms' amount each period or
 * day), `spend` (one UTC hour's admitted requests less those the upstream never served, closed once
 * the hour has passed), `refund` (credits given back for unserved requests of an hour already
 * closed: see CreditLedger.refund). `opening`
 * is not a change: the sum of the entries trimmed off the ledger (older than its retention), shown
 * as its oldest entry so that the ledger still sums to the balance.
 */
export type CreditEntryType = 'grant' | 'topup' | 'adjustment' | 'refill' | 'spend' | 'refund' | 'opening';
const CHANGE_TYPES = ['grant', 'topup', 'adjustment'] as const;
export type CreditChangeType = (typeof CHANGE_TYPES)[number];

/** What one limiter call (or an admin read or change) did to a credit balance. */
export interface CreditBatch {
  before: number;
  after: number;
  refilled: number;
  /**
   * Set on the one call that found the balance unable to pay, since credits last came back: the
   * balance then and the cost it could not cover (absent: the balance reached 0). That call alone
   * announces `credits.exhausted`, whichever replica made it (credit-script.ts, `x`).
   */
  exhausted?: { balance: number; cost?: number };
  /**
   * The balance just after its last top-up, grant or upward adjustment (absent: none yet): what
   * `credits.low` measures a balance without a refill against.
   */
  raisedTo?: number;
}

/** One ledger entry; `amount` is signed (a spend is negative). Times are epoch ms. */
export interface CreditEntry {
  /** Ordered as the ledger is: a later entry has a later id. */
  id: string;
  type: CreditEntryType;
  amount: number;
  /** When it was made; a spend's or refund's hour's start; an opening's, when its newest trimmed entry was written. */
  at: number;
  /** A spend or refund: its hour's end. */
  end?: number;
  /** A refill: the period it is for (`period:<start ms>` or `day:<start ms>`). */
  period?: string;
  reason?: string;
  /** The reference a change was made under, once (an Idempotency-Key's request). */
  ref?: string;
}

/** A change an operator makes. */
export interface CreditChange {
  type: CreditChangeType;
  amount: number;
  reason: string;
  /** Made once per reference: a retry with the same one adds nothing more. */
  ref: string;
  at: number;
}

export type CreditAddResult =
  | {
      outcome: 'added' | 'held';
      entryId: string;
      balance: number;
      refilled: number;
      /** This change took the balance to 0 and is the one to announce `credits.exhausted`. */
      exhausted?: true;
      /** The balance just after the last top-up, grant or upward adjustment (CreditBatch.raisedTo). */
      raisedTo?: number;
    }
  /** It would have taken the balance below zero: nothing changed. */
  | { outcome: 'short'; balance: number; refilled: number };

export interface CreditBalance {
  balance: number;
  /** The hour still being spent (not yet a ledger entry): its start (epoch ms) and spend so far. */
  openHour: { start: number; spent: number } | null;
  /** What a refill due at this read added (it is in the ledger). */
  refilled: number;
}

/** A refund's reference, kept until `keepUntil` (epoch ms): a refund made under it again gives nothing back. */
export interface RefundOnce {
  ref: string;
  keepUntil: number;
}

/**
 * Where balances and their ledgers live: the limiter spends from the same balance in its own call
 * (the Redis script, the memory limiter's step); this is everything else. `owner` is a customer id,
 * or a key id for a key standing for itself. Every read and change first closes a past hour's
 * spend and applies a refill due under `rule`, so the balance is always the ledger's sum less the
 * open hour's spend. Every read and change also trims the entries written before the ledger's
 * retention into its opening entry, in the same atomic step (at most TRIM_BATCH at a time).
 */
export interface CreditLedger {
  balance(owner: string, rule: CreditRule, now: number): Promise<CreditBalance>;
  add(owner: string, rule: CreditRule, change: CreditChange, now: number): Promise<CreditAddResult>;
  /**
   * Gives back `units` credits spent in the UTC hour starting at `hour` (epoch ms) by admitted
   * requests the upstream never served (502, 503, 504), never more than that hour still holds as
   * spent, so a refund creates no credit; returns what it gave back. The hour still open: its
   * spend is lowered, so its `spend` entry is written net of refunds and equals the units the
   * history bills for it (one entry an hour, readable as "what this hour cost"). The hour just
   * closed (a request admitted before the hour ended, answered or written after): a `refund`
   * entry for that hour, since its spend entry is already written and entries never change. An
   * older hour: nothing (refunds are written within seconds of their hour). With `once`, a
   * refund made under its `ref` before (until `keepUntil`, epoch ms) gives nothing back: a spooled
   * refund replayed twice. In Redis the write is fenced: one that failed never lands later.
   */
  refund(owner: string, rule: CreditRule, hour: number, units: number, now: number, once?: RefundOnce): Promise<number>;
  /** Entries newest first; `after` is a `next` this gave out (BadCursorError otherwise). */
  page(owner: string, request: PageRequest): Promise<Page<CreditEntry>>;
}

/** An entry id as both ledgers make them: `<ms>-<sequence>`, as Redis stream ids are. */
export const ENTRY_ID = /^\d{1,16}-\d{1,16}$/;

export const HOUR_MS = 3_600_000;

/** CREDITS_LEDGER_DAYS' default, 400 days: a year of invoices and more, two periods many times over. */
export const DEFAULT_LEDGER_RETENTION_MS = 400 * 86_400_000;

/** The most entries one read or change trims: a long-unread ledger is trimmed over a few calls. */
export const TRIM_BATCH = 1000;

/** The entry an opening balance is shown as: the id of the newest entry it carries forward. */
export function openingEntry(id: string, amount: number): CreditEntry {
  return { id, type: 'opening', amount, at: Number(id.slice(0, id.indexOf('-'))) };
}

/** Whether stream id `a` comes before `b` (`<ms>-<sequence>`, compared as numbers). */
export function entryBefore(a: string, b: string): boolean {
  const [am, as] = a.split('-').map(Number) as [number, number];
  const [bm, bs] = b.split('-').map(Number) as [number, number];
  return am < bm || (am === bm && as < bs);
}
