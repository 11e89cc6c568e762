import { runMigration } from '@animal-store/common/mongo/migrate.js';
import { describe, expect, it } from 'vitest';
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

  it('sends every customer write with w: "majority", and pages with maxTimeMS', async () => {
    const { db, drop, commands } = await dbs!.fresh();
    try {
      await runMigration(db, GATEWAY_MIGRATION, () => {});
      const store = new MongoCustomerStore(db);
      const at = new Date('2025-01-02T00:00:00.000Z');
      const id = 'cus_0000000000000001';
      await store.insert({
        id,
        name: 'Acme',
        plan: 'pro',
        billing: { anchorDay: 1, timeZone: 'UTC' },
        createdAt: at.toISOString(),
      });
      await store.update(id, { plan: 'business' }, at);
      await store.delete(id, at);
      const writes = commands.filter((c) => ['insert', 'update', 'findAndModify'].includes(c.commandName));
      expect(writes.map((c) => c.commandName)).toEqual(['insert', 'findAndModify', 'update']);
      for (const write of writes) {
        expect(write.command.writeConcern, write.commandName).toEqual({ w: 'majority', wtimeout: 4000 });
      }
      commands.length = 0;
      await store.get(id);
      await store.list({}, { limit: 10 });
      expect(commands.map((c) => [c.commandName, c.command.maxTimeMS])).toEqual([
        ['find', 1000],
        ['find', 3000],
      ]);
    } finally {
      await drop();
    }
  });
});
