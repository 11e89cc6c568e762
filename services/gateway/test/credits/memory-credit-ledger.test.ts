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
