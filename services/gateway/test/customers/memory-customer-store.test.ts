import { MemoryCustomerStore } from '../../src/customers/memory-customer-store.js';
import { customerStoreContract } from './customer-store.contract.js';

customerStoreContract('MemoryCustomerStore', async () => ({
  store: new MemoryCustomerStore(),
  cleanup: async () => {},
}));
