import { describe } from 'vitest';
import { MongoCustomerStore } from '../../src/customers/mongo-customer-store.js';
import { useMongoDb } from '../support/mongo-db.js';
import { customerStoreContract } from './customer-store.contract.js';

const mongo = await useMongoDb('MongoCustomerStore contract');

describe.skipIf(!mongo)('MongoCustomerStore', () => {
  const dbs = mongo?.connect();

  customerStoreContract('MongoCustomerStore', async () => {
    const { db, drop } = await dbs!.fresh();
    const store = new MongoCustomerStore(db);
    await store.init();
    return { store, cleanup: drop };
  });
});
