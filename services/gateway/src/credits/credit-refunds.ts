import { randomUUID } from 'node:crypto';
import { isMongoUnreachable } from '@animal-store/common/mongo/errors.js';
import { isRedisUnreachable } from '../redis/errors.js';
import type { RefundRecord } from '../usage/usage-spool.js';
import { WriteBehind } from '../usage/write-behind.js';
import type { CreditLedger, RefundOnce } from './credit-ledger.js';
import { HOUR_MS } from './credit-ledger.js';
import type { CreditRule } from './credit-terms.js';

/** Whom a refund goes to: the owner's rule, or why it gets nothing back (said in the log). */
export type RefundTarget = { rule: CreditRule } | { dropped: string };

export interface CreditRefundsOptions {
  ledger: Pick<CreditLedger, 'refund'>;
  /**
   * The owner's credit terms as they stand when the refund is written, or why it gets nothing
   * back: not found, credits turned off since the request, a key that has joined a customer since.
   */
  ruleOf: (owner: string) => Promise<RefundTarget>;
  now: () => number;
  onError: (err: unknown) => void;
  /** A refund not made (ruleOf's reason): credits that stay spent must leave a trace. */
  onDropped: (drop: { owner: string; hour: number; units: number; reason: string }) => void;
  /**
   * Where refunds wait that could not be written because a store was away (the usage spool, which
   * hands them back to replay once Redis answers); `count` of them in this batch, for the log.
   * None: they are lost, and logged (onError).
   */
  spool?: { append(record: RefundRecord): void; spooled(count: number): void };
}

/** How long a replayed refund's mark is kept: far longer than a spool waits for Redis. */
const REPLAY_MARK_MS = 7 * 86_400_000;

const storeAway = (err: unknown): boolean => isRedisUnreachable(err) || isMongoUnreachable(err);

/**
 * Gives back the credits of admitted requests the upstream never served (502, 503, 504), which the
 * limiter spent in its call before the answer was known. Off the request path, as the usage
 * history's upstreamFailed counts are: the proxy adds to a write-behind batch (WriteBehind), and
 * once a second this replica writes one refund per owner and UTC hour (CreditLedger.refund).
 * Each failure is seen by the one replica that proxied it and taken out of the batch before its
 * write, so it is given back at most once. A write that fails because Redis (or the key store) is
 * away has not landed and never will (the ledger's refund is fenced): it goes to the spool, which
 * gives it back once Redis answers, under a reference of its own, so once however often replayed.
 */
export class CreditRefunds {
  /** `<owner>\n<UTC hour start>` → units not yet given back. */
  private readonly pending: WriteBehind<number>;

  constructor(private readonly options: CreditRefundsOptions) {
    this.pending = new WriteBehind((batch) => this.write(batch), options.onError);
  }

  /** An admitted request of `owner`'s, which spent `units` credits at `admittedAt`, was not served. */
  upstreamFailed(owner: string, units: number, admittedAt: number): void {
    const field = `${owner}\n${admittedAt - (admittedAt % HOUR_MS)}`;
    this.pending.set(field, (this.pending.get(field) ?? 0) + units);
  }

  /** Writes the refunds waiting; resolves once each is written or has failed (and been logged). */
  flush(): Promise<void> {
    return this.pending.flush();
  }

  /**
   * One refund per entry. A write that fails with a store away is spooled (see the class); any
   * other failure is logged, not retried, and never fails the others.
   */
  private async write(batch: ReadonlyMap<string, number>): Promise<void> {
    const { spool } = this.options;
    let spooled = 0;
    await Promise.all(
      [...batch].map(async ([field, units]) => {
        const [owner, hourText] = field.split('\n') as [string, string];
        const hour = Number(hourText);
        try {
          await this.give(owner, hour, units);
        } catch (err) {
          if (!spool || !storeAway(err)) return this.options.onError(err);
          spool.append({ kind: 'refund', owner, hour, units, ref: randomUUID() });
          spooled++;
        }
      }),
    );
    if (spooled > 0) spool?.spooled(spooled);
  }

  private async give(owner: string, hour: number, units: number, once?: RefundOnce) {
    const target = await this.options.ruleOf(owner);
    if ('dropped' in target) this.options.onDropped({ owner, hour, units, reason: target.dropped });
    else await this.options.ledger.refund(owner, target.rule, hour, units, this.options.now(), once);
  }

  /**
   * Gives back spooled refunds (UsageSpool's replay), each once under its reference. Rejects while
   * a store is away, so the spool keeps the segment and tries again; any other failure is logged.
   */
  async replay(records: readonly RefundRecord[]): Promise<void> {
    const keepUntil = this.options.now() + REPLAY_MARK_MS;
    for (const { owner, hour, units, ref } of records) {
      try {
        await this.give(owner, hour, units, { ref, keepUntil });
      } catch (err) {
        if (storeAway(err)) throw err;
        this.options.onError(err);
      }
    }
  }
}
