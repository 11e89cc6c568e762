import { randomBytes } from 'node:crypto';
import { findMongo } from '@animal-store/tests/support/mongo.js';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe } from 'vitest';
import { MongoCustomerStore } from '../../src/customers/mongo-customer-store.js';
import { customerStoreContract } from './customer-store.contract.js';

const { mongo, reason } = await findMongo();
if (!mongo) console.warn(`[skip] MongoCustomerStore contract: ${reason}`);

describe.skipIf(!mongo)('MongoCustomerStore', () => {
  let client: MongoClient;
  beforeAll(async () => {
    client = new MongoClient(mongo!.url, { serverSelectionTimeoutMS: 10_000 });
    await client.connect();
  });
  afterAll(async () => {
    await client?.close();
    await mongo?.stop();
  });

  customerStoreContract('MongoCustomerStore', async () => {
    // A database of its own per store, so parallel runs and real data are never touched.
    const db = client.db(`gateway_test_${randomBytes(8).toString('hex')}`);
    const store = new MongoCustomerStore(db);
    await store.init();
    return { store, cleanup: async () => void (await db.dropDatabase()) };
  });
});
