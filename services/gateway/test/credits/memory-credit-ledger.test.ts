import { MemoryCreditLedger } from '../../src/credits/memory-credit-ledger.js';
import { creditLedgerContract } from './credit-ledger.contract.js';

creditLedgerContract('memory', async () => ({ ledger: new MemoryCreditLedger(), cleanup: async () => {} }));
