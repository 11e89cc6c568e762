// The gateway's migration against a real MongoDB (skipped, with one line, where there is none):
// run twice and two at once it leaves the same indexes, and it backfills what older releases wrote.
import { indexesNotInPlace, listIndexes } from '@animal-store/common/mongo/indexes.js';
import { runMigration } from '@animal-store/common/mongo/migrate.js';
import { describe, expect, it } from 'vitest';
import { MongoCustomerStore } from '../src/customers/mongo-customer-store.js';
import { MongoKeyStore } from '../src/keys/mongo-key-store.js';
import { GATEWAY_INDEXES, GATEWAY_MIGRATION } from '../src/migrations.js';
import { useMongoDb } from './support/mongo-db.js';

const mongo = await useMongoDb('gateway migration');

/** Each collection's indexes as the server lists them, by name, without the version field. */
async function indexSnapshot(db: Parameters<typeof listIndexes>[0]) {
  const listed = await listIndexes(db, GATEWAY_INDEXES);
  return [...listed].map(([collection, indexes]) => [
    collection,
    indexes.map(({ v: _, ...index }) => index).sort((a, b) => String(a.name).localeCompare(String(b.name))),
  ]);
}

describe.skipIf(!mongo)('gateway migration on MongoDB', () => {
  const dbs = mongo?.connect();

  it('builds every index; run again, and twice at once, it leaves the same indexes', async () => {
    const { db, drop } = await dbs!.fresh();
    try {
      const lines: string[] = [];
      await runMigration(db, GATEWAY_MIGRATION, (line) => lines.push(line));
      expect(indexesNotInPlace(GATEWAY_INDEXES, await listIndexes(db, GATEWAY_INDEXES))).toEqual([]);
      expect(lines.some((line) => line.startsWith('keys: building'))).toBe(true);
      const first = await indexSnapshot(db);
      await runMigration(db, GATEWAY_MIGRATION, () => {});
      expect(await indexSnapshot(db)).toEqual(first);
      await Promise.all([runMigration(db, GATEWAY_MIGRATION, () => {}), runMigration(db, GATEWAY_MIGRATION, () => {})]);
      expect(await indexSnapshot(db)).toEqual(first);
    } finally {
      await drop();
    }
  });

  it('two first runs at once on an empty database both finish with every index', async () => {
    const { db, drop } = await dbs!.fresh();
    try {
      await Promise.all([runMigration(db, GATEWAY_MIGRATION, () => {}), runMigration(db, GATEWAY_MIGRATION, () => {})]);
      expect(indexesNotInPlace(GATEWAY_INDEXES, await listIndexes(db, GATEWAY_INDEXES))).toEqual([]);
    } finally {
      await drop();
    }
  });

  it('backfills nameLower (non-ASCII too), revoked and deleted on documents older releases wrote', async () => {
    const { db, drop } = await dbs!.fresh();
    try {
      const createdAt = new Date('2025-01-01T00:00:00.000Z');
      const key = { plan: 'free', createdAt };
      await db.collection('keys').insertMany([
        // Before nameLower existed; and one an ASCII-only $toLower lower-cased in part.
        { ...key, id: 'k1', name: 'ÉCOLE Ünïon', sha256: 'a'.repeat(64) },
        { ...key, id: 'k2', name: 'ÉCOLE', nameLower: 'École', sha256: 'b'.repeat(64), revokedAt: createdAt },
      ]);
      await db.collection('customers').insertMany([
        { id: 'c1', name: 'Ärger GmbH', nameLower: 'Ärger gmbh', plan: 'pro', createdAt },
        { id: 'c2', name: 'Gone', nameLower: 'gone', plan: 'pro', createdAt, deletedAt: createdAt },
      ]);
      await runMigration(db, GATEWAY_MIGRATION, () => {});
      const keys = new MongoKeyStore(db);
      const customers = new MongoCustomerStore(db);
      const ids = async (filter: Parameters<MongoKeyStore['page']>[0]) =>
        (await keys.page(filter, { limit: 10 })).items.map((k) => k.id);
      expect(await ids({ name: 'école' })).toEqual(['k2', 'k1']);
      expect(await ids({ name: 'école ü' })).toEqual(['k1']);
      expect(await ids({ revoked: true })).toEqual(['k2']);
      expect(await ids({ revoked: false })).toEqual(['k1']);
      const live = await customers.list({}, { limit: 10 });
      expect(live.items.map((c) => c.id)).toEqual(['c1']);
      expect((await customers.list({ name: 'ärger' }, { limit: 10 })).items.map((c) => c.id)).toEqual(['c1']);
      // A second run finds nothing left to write.
      const lines: string[] = [];
      await runMigration(db, GATEWAY_MIGRATION, (line) => lines.push(line));
      expect(lines.filter((line) => / done \(/.test(line) && !line.endsWith(' 0 updated)'))).toEqual([]);
    } finally {
      await drop();
    }
  });
});
