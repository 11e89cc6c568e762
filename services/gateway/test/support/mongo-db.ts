import { randomBytes } from 'node:crypto';
import { findMongo } from '@animal-store/tests/support/mongo.js';
import { type CommandStartedEvent, type Db, MongoClient } from 'mongodb';
import { afterAll, beforeAll } from 'vitest';

export interface MongoDbs {
  /** A database of its own, so parallel runs and real data are never touched; drop() removes it. */
  fresh(): Promise<{ db: Db; drop(): Promise<void>; commands: CommandStartedEvent[] }>;
}

/**
 * The MongoDB of a store's suite (MONGO_URL, a container or a mongod on PATH: findMongo), or null,
 * with the reason printed, where there is none: the caller skips its suite with
 * `describe.skipIf(!mongo)`. Call `connect()` inside that describe: it opens one client before the
 * suite and closes it (and stops a MongoDB it started) after.
 */
export async function useMongoDb(suite: string): Promise<{ connect(): MongoDbs } | null> {
  const { mongo, reason } = await findMongo();
  if (!mongo) {
    console.warn(`[skip] ${suite}: ${reason}`);
    return null;
  }
  return {
    connect() {
      let client: MongoClient | undefined;
      beforeAll(async () => {
        // Commands are monitored so a suite can check what the store sends (write concern, maxTimeMS).
        client = new MongoClient(mongo.url, { serverSelectionTimeoutMS: 10_000, monitorCommands: true });
        await client.connect();
      });
      afterAll(async () => {
        await client?.close();
        await mongo.stop();
      });
      return {
        async fresh() {
          if (!client) throw new Error('useMongoDb: connect() runs before the suite; call fresh() in a test');
          const db = client.db(`gateway_test_${randomBytes(8).toString('hex')}`);
          // Every command sent to this database, as the driver sent it.
          const commands: CommandStartedEvent[] = [];
          const record = (event: CommandStartedEvent) => {
            if (event.databaseName === db.databaseName) commands.push(event);
          };
          client.on('commandStarted', record);
          return {
            db,
            commands,
            drop: async () => {
              client?.off('commandStarted', record);
              await db.dropDatabase();
            },
          };
        },
      };
    },
  };
}
