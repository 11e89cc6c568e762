import { WriteBehind } from '../usage/write-behind.js';
import type { CreditLedger } from './credit-ledger.js';
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
}

/**
 * Gives back the credits of admitted requests the upstream never served (502, 503, 504), which the
 * limiter spent in its call before the answer was known. Off the request path, as the usage
 * history's upstreamFailed counts are: the proxy adds to a write-behind batch (WriteBehind), and
 * once a second this replica writes one refund per owner and UTC hour (CreditLedger.refund).
 * Each failure is seen by the one replica that proxied it and taken out of the batch before its
 * write, so it is given back at most once.
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
   * One refund per entry. A write that fails is logged, not retried, and never fails the others:
   * Redis may have applied it, and a retry would give it back twice.
   */
  private async write(batch: ReadonlyMap<string, number>): Promise<void> {
    await Promise.all(
      [...batch].map(async ([field, units]) => {
        const [owner, hour] = field.split('\n') as [string, string];
        try {
          const target = await this.options.ruleOf(owner);
          if ('dropped' in target) this.options.onDropped({ owner, hour: Number(hour), units, reason: target.dropped });
          else await this.options.ledger.refund(owner, target.rule, Number(hour), units, this.options.now());
        } catch (err) {
          this.options.onError(err);
        }
      }),
    );
  }
}
