import { randomUUID } from 'node:crypto';
import { runMigration } from '@animal-store/common/mongo/migrate.js';
import { findMongo } from '@animal-store/tests/support/mongo.js';
import { type Db, MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PETS_MIGRATION } from '../src/migrations.js';
import { MongoPetStore, mongoClientOptions } from '../src/store/mongo-pet-store.js';
import { petStoreContract } from './store-contract.js';

const { mongo, reason } = await findMongo();
if (!mongo) console.warn(`[skip] MongoPetStore contract: ${reason}`);

describe.skipIf(!mongo)('MongoPetStore', () => {
  let client: MongoClient;
  let db: Db;

  beforeAll(async () => {
    client = new MongoClient(mongo!.url, mongoClientOptions);
    await client.connect();
    // A database of its own per run, so parallel runs and real data are never touched.
    db = client.db(`pets_test_${randomUUID().replaceAll('-', '')}`.slice(0, 38));
  });

  afterAll(async () => {
    await db?.dropDatabase();
    await client?.close();
    await mongo?.stop();
  });

  async function freshStore(): Promise<MongoPetStore> {
    await db.dropDatabase();
    await runMigration(db, PETS_MIGRATION, () => {});
    return new MongoPetStore(db);
  }

  petStoreContract('MongoPetStore', freshStore);

  it('creates the unique id index and the status index', async () => {
    await freshStore();
    const indexes = await db.collection('pets').listIndexes().toArray();
    const byName = new Map(indexes.map((index) => [index.name, index]));
    expect(byName.get('id_unique')?.key).toEqual({ id: 1 });
    expect(byName.get('id_unique')?.unique).toBe(true);
    expect(byName.get('status_id')?.key).toEqual({ status: 1, id: 1 });
  });

  it('stores plain documents with only the declared fields, and one counter', async () => {
    const store = await freshStore();
    const pet = await store.create({ name: 'Rex', categoryId: 3 });
    const docs = await db
      .collection('pets')
      .find({}, { projection: { _id: 0 } })
      .toArray();
    expect(docs).toEqual([{ id: pet.id, name: 'Rex', categoryId: 3 }]);
    expect(await db.collection('counters').find().toArray()).toEqual([{ _id: 'pets', seq: pet.id }]);
  });

  it('refuses a second pet with an existing id (the unique index holds)', async () => {
    const store = await freshStore();
    const pet = await store.create({ name: 'Rex', categoryId: 3 });
    await expect(db.collection('pets').insertOne({ id: pet.id, name: 'Dup', categoryId: 1 })).rejects.toThrow(
      /duplicate key/,
    );
  });

  it('recovers from a counter behind the pets (a restore without counters): raised past the highest id', async () => {
    const store = await freshStore();
    const first = await store.create({ name: 'Rex', categoryId: 3 });
    await db.collection('pets').insertMany([
      { id: first.id + 1, name: 'Restored', categoryId: 1 },
      { id: first.id + 2, name: 'Restored', categoryId: 1 },
    ]);
    await db.collection('counters').deleteMany({});
    const pet = await store.create({ name: 'After the restore', categoryId: 2 });
    expect(pet.id).toBe(first.id + 3);
    expect(await store.get(pet.id)).toEqual(pet);
    // Caught up for good: the next create takes the next id at once.
    expect((await store.create({ name: 'Next', categoryId: 2 })).id).toBe(first.id + 4);
    expect(await db.collection('counters').find().toArray()).toEqual([{ _id: 'pets', seq: first.id + 4 }]);
  });
});
