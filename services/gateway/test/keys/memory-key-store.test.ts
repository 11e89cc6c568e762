import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import { keyStoreContract } from './key-store.contract.js';

keyStoreContract('MemoryKeyStore', async () => ({ store: new MemoryKeyStore(), cleanup: async () => {} }));
