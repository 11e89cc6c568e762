import { randomUUID } from 'node:crypto';
import { RedisKeyStore } from '../../src/keys/redis-key-store.js';
import { useRedisClient } from '../support/helpers.js';
import { keyStoreContract } from './key-store.contract.js';

const redis = useRedisClient();

// A fresh prefix is a fresh, empty store on the file's own redis-server.
keyStoreContract('RedisKeyStore', async () => ({
  store: new RedisKeyStore(redis(), `ks${randomUUID().slice(0, 8)}:`),
  cleanup: async () => {},
}));
