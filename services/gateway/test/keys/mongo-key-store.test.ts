import { runMigration } from '@animal-store/common/mongo/migrate.js';
import type { CommandStartedEvent, Db } from 'mongodb';
import { describe, expect, it } from 'vitest';
import { generateApiKey, hashApiKey, newKeyId } from '../../src/keys/api-key.js';
import { MongoKeyStore } from '../../src/keys/mongo-key-store.js';
import { GATEWAY_MIGRATION } from '../../src/migrations.js';
import { useMongoDb } from '../support/mongo-db.js';
import { keyStoreContract } from './key-store.contract.js';

const mongo = await useMongoDb('MongoKeyStore contract');

describe.skipIf(!mongo)('MongoKeyStore', () => {
  const dbs = mongo?.connect();

  async function freshDb(): Promise<{
    db: Db;
    store: MongoKeyStore;
    cleanup(): Promise<void>;
    commands: CommandStartedEvent[];
  }> {
    const { db, drop, commands } = await dbs!.fresh();
    // What a deployment runs before the gateway starts.
    await runMigration(db, GATEWAY_MIGRATION, () => {});
    return { db, store: new MongoKeyStore(db), cleanup: drop, commands };
  }

  keyStoreContract('MongoKeyStore', freshDb);

  it('the migration creates unique indexes on id and sha256, and a second run changes nothing', async () => {
    const { db, cleanup } = await freshDb();
    try {
      await runMigration(db, GATEWAY_MIGRATION, () => {});
      const indexes = await db.collection('keys').listIndexes().toArray();
      const byName = new Map(indexes.map((index) => [index.name, index]));
      expect(byName.get('id_unique')?.key).toEqual({ id: 1 });
      expect(byName.get('id_unique')?.unique).toBe(true);
      expect(byName.get('sha256_unique')?.key).toEqual({ sha256: 1 });
      expect(byName.get('sha256_unique')?.unique).toBe(true);
      // A rotated-out secret is found by its hash too, and no two keys share one.
      expect(byName.get('previous_sha256_unique')?.key).toEqual({ 'previous.sha256': 1 });
      expect(byName.get('previous_sha256_unique')?.unique).toBe(true);
      expect(byName.get('updatedAt')?.key).toEqual({ updatedAt: 1 });
      // What each page filter and the expiry scan read (docs/customers.md names them).
      const order = { createdAt: -1, id: -1 };
      expect(byName.get('created_id')?.key).toEqual(order);
      expect(byName.get('revoked_created_id')?.key).toEqual({ revoked: 1, ...order });
      expect(byName.get('name_created_id')?.key).toEqual({ nameLower: 1, ...order });
      expect(byName.get('created_id_name_prefix')?.key).toEqual({ ...order, nameLower: 1, prefix: 1 });
      expect(byName.get('plan_created_id')?.key).toEqual({ plan: 1, ...order });
      expect(byName.get('prefix_created_id')?.key).toEqual({ prefix: 1, ...order });
      expect(byName.get('customerId_created_id')?.key).toEqual({ customerId: 1, ...order });
      expect(byName.get('expiresAt')?.key).toEqual({ expiresAt: 1 });
    } finally {
      await cleanup();
    }
  });

  it('stores every timestamp as a date, and never a plaintext key', async () => {
    const { db, store, cleanup } = await freshDb();
    try {
      const key = generateApiKey();
      const id = newKeyId();
      await store.insert({
        id,
        name: 'n',
        plan: 'free',
        sha256: hashApiKey(key),
        createdAt: '2025-01-01T00:00:00.000Z',
        expiresAt: '2030-01-01T00:00:00.000Z',
      });
      const next = generateApiKey();
      const rotation = { sha256: hashApiKey(next), previousExpiresAt: '2025-01-20T00:00:00.000Z' };
      await store.rotate(id, rotation, new Date('2025-01-19T00:00:00.000Z'));
      await store.revoke(id, new Date('2025-02-01T00:00:00.000Z'));
      const doc = await db.collection('keys').findOne({ id }, { projection: { _id: 0 } });
      expect(doc?.createdAt).toBeInstanceOf(Date);
      expect(doc?.revokedAt).toBeInstanceOf(Date);
      expect(doc).toEqual({
        id,
        name: 'n',
        // Kept beside the name for the case-insensitive search (toDocument writes it), and the
        // revoked flag the revoked pages read off revoked_created_id.
        nameLower: 'n',
        revoked: true,
        plan: 'free',
        sha256: hashApiKey(next),
        previous: { sha256: hashApiKey(key), expiresAt: new Date('2025-01-20T00:00:00.000Z') },
        createdAt: new Date('2025-01-01T00:00:00.000Z'),
        expiresAt: new Date('2030-01-01T00:00:00.000Z'),
        updatedAt: new Date('2025-02-01T00:00:00.000Z'),
        revokedAt: new Date('2025-02-01T00:00:00.000Z'),
      });
      expect(JSON.stringify(doc)).not.toContain(key);
      expect(JSON.stringify(doc)).not.toContain(next);
    } finally {
      await cleanup();
    }
  });

  it('sends every key write with w: "majority", lookups with maxTimeMS, pages with maxTimeMS', async () => {
    const { store, cleanup, commands } = await freshDb();
    try {
      const key = generateApiKey();
      const id = newKeyId();
      const at = new Date('2025-01-02T00:00:00.000Z');
      await store.insert({ id, name: 'n', plan: 'free', sha256: hashApiKey(key), createdAt: at.toISOString() });
      await store.update(id, { plan: 'pro' }, at);
      await store.update(id, { expiresAt: '2030-01-01T00:00:00.000Z' }, at);
      await store.rotate(id, { sha256: hashApiKey(generateApiKey()), previousExpiresAt: at.toISOString() }, at);
      await store.revoke(id, at);
      const writes = commands.filter((c) => ['insert', 'update', 'findAndModify'].includes(c.commandName));
      expect(writes.map((c) => c.commandName)).toEqual([
        'insert',
        'findAndModify',
        'findAndModify',
        'findAndModify',
        'update',
      ]);
      for (const write of writes)
        expect(write.command.writeConcern, write.commandName).toEqual({ w: 'majority', wtimeout: 4000 });
      commands.length = 0;
      await store.findByHash(hashApiKey(key));
      await store.page({}, { limit: 10 });
      expect(commands.map((c) => [c.commandName, c.command.maxTimeMS])).toEqual([
        ['find', 1000],
        ['find', 3000],
      ]);
    } finally {
      await cleanup();
    }
  });
});
