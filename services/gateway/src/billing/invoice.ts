import type { PlanPrice } from '../plans/plan-price.js';

export type InvoiceLineKind = 'base' | 'included' | 'overage' | 'credits';

export interface InvoiceLine {
  line: InvoiceLineKind;
  description: string;
  quantity: number;
  billedUnits?: number;
  unitPrice?: number;
  per?: number;
  /** Integer minor units of the invoice's currency. */
  amount: number;
}

export interface Invoice {
  currency: string;
  lines: InvoiceLine[];
  total: number;
}

/** An invoice whose amounts would not survive as JSON numbers (beyond 2^53 − 1 minor units). */
export class InvoiceTooLargeError extends Error {}

function safe(amount: bigint, what: string): number {
  if (amount > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new InvoiceTooLargeError(`${what} is ${amount} minor units, beyond 2^53 − 1: it cannot be shown exactly`);
  }
  return Number(amount);
}

/**
 * The invoice for a billing period: the base fee, the units the price includes, the overage (units
 * beyond them, billed by whole `per`, so one unit over is a whole `per`), and the credits the
 * period spent. Each unit is paid once: a unit served by spending a credit was paid for when the
 * credit was bought, so it is neither included nor overage; only the units left over (served
 * while no credits were spent: before the terms, or by the per-replica fallback) meet the
 * included units and then the overage. Credits spent are capped at the units when they take them
 * out, since the ledger's UTC hours and a part-hour zone's local hours may differ by a part-hour.
 * The credits are a line of their own and add nothing to the total. Computed in BigInt so counts
 * past 2^31 or 2^53 never round; throws InvoiceTooLargeError for an amount a JSON number cannot
 * carry exactly.
 */
export function invoiceFor(price: PlanPrice, units: number, creditsUsed: number | null): Invoice {
  const unpaid = units - Math.min(units, Math.max(0, creditsUsed ?? 0));
  const included = Math.min(unpaid, price.includedUnits);
  const over = BigInt(unpaid - included);
  const per = BigInt(price.per);
  const blocks = (over + per - 1n) / per;
  const overage = safe(blocks * BigInt(price.unitPrice), 'the overage');
  const lines: InvoiceLine[] = [
    { line: 'base', description: 'Base fee for the billing period', quantity: 1, amount: price.base },
    {
      line: 'included',
      description: `Units included (${price.includedUnits})`,
      quantity: included,
      amount: 0,
    },
    {
      line: 'overage',
      description: `Units beyond those included, ${price.unitPrice} per ${price.per} started`,
      quantity: Number(over),
      billedUnits: safe(blocks * per, 'the billed overage units'),
      unitPrice: price.unitPrice,
      per: price.per,
      amount: overage,
    },
  ];
  if (creditsUsed !== null) {
    lines.push({ line: 'credits', description: 'Prepaid credits spent', quantity: creditsUsed, amount: 0 });
  }
  const total = safe(BigInt(price.base) + BigInt(overage), 'the total');
  return { currency: price.currency, lines, total };
}
