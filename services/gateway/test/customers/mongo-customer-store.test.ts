import { runMigration } from '@animal-store/common/mongo-migrate.js';
import { describe } from 'vitest';
import { MongoCustomerStore } from '../../src/customers/mongo-customer-store.js';
import { GATEWAY_MIGRATION } from '../../src/migrations.js';
import { useMongoDb } from '../support/mongo-db.js';
import { customerStoreContract } from './customer-store.contract.js';

const mongo = await useMongoDb('MongoCustomerStore contract');

describe.skipIf(!mongo)('MongoCustomerStore', () => {
  const dbs = mongo?.connect();

  customerStoreContract('MongoCustomerStore', async () => {
    const { db, drop } = await dbs!.fresh();
    // What a deployment runs before the gateway starts.
    await runMigration(db, GATEWAY_MIGRATION, () => {});
    const store = new MongoCustomerStore(db);
    return { store, cleanup: drop };
  });
});
