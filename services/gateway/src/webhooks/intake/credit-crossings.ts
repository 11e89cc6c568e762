import type { CreditBatch } from '../../limits/key-limiter.js';

/** A credit event one limiter call caused, with what it says beyond the key. */
export interface CreditCrossing {
  type: 'credits.low' | 'credits.exhausted' | 'credits.refilled';
  data: { balance: number; threshold?: number; refilled?: number; cost?: number };
}

/**
 * The credit events of one limiter call (one batch of a key's requests): a refill it applied, the
 * low thresholds its spend crossed, and the balance found unable to pay (a request refused for
 * credits, or the balance reaching 0) when this call is the one that marked it so. A threshold is a percent of the
 * refill `amount` used (as the quota warnings' of a window's limit): 80 is crossed when the
 * balance falls from above 20 % of the amount to 20 % or below. Without a refill, the amount is
 * the balance just after its last top-up, grant or upward adjustment (CreditBatch.raisedTo): a
 * prepaid balance hears it has used 80 % of what it last bought; without any, nothing to measure
 * against, so only exhaustion. The shared limiter orders every call on a balance, so each
 * crossing falls in exactly one call, whichever replica made it.
 */
export function creditCrossings(
  batch: CreditBatch,
  refillAmount: number | null,
  percents: readonly number[],
): CreditCrossing[] | undefined {
  const crossed: CreditCrossing[] = [];
  const { before, after, refilled } = batch;
  if (refilled > 0) crossed.push({ type: 'credits.refilled', data: { balance: before, refilled } });
  const amount = refillAmount ?? batch.raisedTo ?? null;
  if (after < before && amount !== null) {
    for (const percent of percents) {
      const at = Math.floor((amount * (100 - percent)) / 100);
      if (before > at && after <= at && after > 0) {
        crossed.push({ type: 'credits.low', data: { balance: after, threshold: percent } });
      }
    }
  }
  // Marked in the balance by the one call that found it unable to pay (CreditBatch.exhausted).
  if (batch.exhausted) crossed.push({ type: 'credits.exhausted', data: { ...batch.exhausted } });
  return crossed.length > 0 ? crossed : undefined;
}
