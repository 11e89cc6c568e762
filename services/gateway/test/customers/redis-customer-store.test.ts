import { randomUUID } from 'node:crypto';
import { RedisCustomerStore } from '../../src/customers/redis-customer-store.js';
import { RedisKeyStore } from '../../src/keys/redis-key-store.js';
import { useRedisClient } from '../support/helpers.js';
import { customerStoreContract } from './customer-store.contract.js';

const redis = useRedisClient();

// A fresh prefix is a fresh, empty store on the file's own redis-server. A key store comes first
// on the same client, as the gateway makes them: the two share one write script.
customerStoreContract('RedisCustomerStore', async () => {
  const prefix = `cs${randomUUID().slice(0, 8)}:`;
  new RedisKeyStore(redis(), prefix);
  return { store: new RedisCustomerStore(redis(), prefix), cleanup: async () => {} };
});
