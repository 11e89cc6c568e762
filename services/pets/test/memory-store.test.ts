import { MemoryPetStore } from '../src/store/memory-pet-store.js';
import { petStoreContract } from './store-contract.js';

petStoreContract('MemoryPetStore', async () => new MemoryPetStore());
