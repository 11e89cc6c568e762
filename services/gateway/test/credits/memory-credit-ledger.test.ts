import { describe, expect, it } from 'vitest';
import type { CreditRule } from '../../src/credits/credit-terms.js';
import { MemoryCreditLedger } from '../../src/credits/memory-credit-ledger.js';
import { UTC_CALENDAR } from '../../src/limits/calendar.js';
import { creditLedgerContract } from './credit-ledger.contract.js';

const NO_REFILL: CreditRule = { refill: null, calendar: UTC_CALENDAR };

creditLedgerContract('memory', async (retentionMs) => {
  const ledger = new MemoryCreditLedger(retentionMs);
  return {
    ledger,
    // As the memory limiter's step: the balance as it stands at `now`, spent only when it covers the cost.
    spend: async (owner, units, now) => {
      const { held } = ledger.state(owner, NO_REFILL, now);
      if (held.balance < units) return false;
      ledger.spend(held, units);
      return true;
    },
    cleanup: async () => {},
  };
});

describe('memory ledger: refund references', () => {
  it('forgets a reference at its keepUntil, as Redis drops its mark, and keeps it until then', async () => {
    const ledger = new MemoryCreditLedger();
    const hour = Date.parse('2026-11-20T10:00:00Z');
    await ledger.add('owner', NO_REFILL, { type: 'topup', amount: 20, reason: 'stock', ref: 'stock', at: hour }, hour);
    const { held } = ledger.state('owner', NO_REFILL, hour);
    ledger.spend(held, 10);
    const once = { ref: 'spooled-1', keepUntil: hour + 60_000 };
    expect(await ledger.refund('owner', NO_REFILL, hour, 2, hour + 1_000, once)).toBe(2);
    expect(await ledger.refund('owner', NO_REFILL, hour, 2, hour + 59_999, once)).toBe(0);
    // Past its keepUntil the mark is gone: the same reference gives back again.
    expect(await ledger.refund('owner', NO_REFILL, hour, 2, hour + 60_000, once)).toBe(2);
  });
});

// The memory limiter's step reads these answers to send credits.exhausted once (the Redis limit
// script's `x` mark): the first call that finds the balance unable to pay, until credits come back.
describe('memory ledger: the balance found unable to pay, announced once', () => {
  const DAILY: CreditRule = { refill: { amount: 3, every: 'day' }, calendar: UTC_CALENDAR };
  const day = Date.parse('2026-11-20T00:00:00Z');

  it('announces a fresh balance that cannot pay a cost, with its balance and the cost, once', () => {
    const ledger = new MemoryCreditLedger();
    const { held } = ledger.state('owner', NO_REFILL, day);
    expect(ledger.exhaust(held, 0, 5)).toEqual({ balance: 0, cost: 5 });
    expect(ledger.exhaust(held, 0, 5)).toBeUndefined();
    expect(ledger.exhaust(held, 0)).toBeUndefined();
  });

  it('announces the spend that leaves 0, not one that leaves more, and again only after a top-up', async () => {
    const ledger = new MemoryCreditLedger();
    const topUp = (amount: number, ref: string) =>
      ledger.add('owner', NO_REFILL, { type: 'topup', amount, reason: 'x', ref, at: day }, day);
    await topUp(3, 'a');
    const { held } = ledger.state('owner', NO_REFILL, day);
    expect(ledger.spend(held, 2)).toBeUndefined();
    expect(ledger.spend(held, 1)).toEqual({ balance: 0 });
    expect(ledger.exhaust(held, 0, 1)).toBeUndefined();
    // A refund gives back what an unserved request took: no new announcement at the bottom.
    expect(await ledger.refund('owner', NO_REFILL, day, 1, day + 1)).toBe(1);
    expect(ledger.spend(held, 1)).toBeUndefined();
    await topUp(1, 'b');
    expect(ledger.spend(held, 1)).toEqual({ balance: 0 });
  });

  it('announces again after a refill brought credits back', () => {
    const ledger = new MemoryCreditLedger();
    const first = ledger.state('owner', DAILY, day);
    expect(first.refilled).toBe(3);
    expect(ledger.spend(first.held, 3)).toEqual({ balance: 0 });
    expect(ledger.exhaust(first.held, 0, 1)).toBeUndefined();
    const next = ledger.state('owner', DAILY, day + 86_400_000);
    expect(next.refilled).toBe(3);
    expect(ledger.exhaust(next.held, 3, 4)).toEqual({ balance: 3, cost: 4 });
  });
});
