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
