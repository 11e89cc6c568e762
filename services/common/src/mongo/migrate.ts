import {
  type AnyBulkWriteOperation,
  type Db,
  type Document,
  type Filter,
  MongoClient,
  type MongoClientOptions,
} from 'mongodb';
import { redactUrl } from '../env.js';
import { type CollectionIndexes, createIndexes, indexesNotInPlace, listIndexes } from './indexes.js';

/**
 * The migration's own client settings: an index build on a large collection, or a pass over every
 * document, takes minutes, so no socket timeout cuts it (the services' few seconds would); a
 * server is still looked for for only 30 s, so a wrong MONGO_URL fails in good time.
 */
const MIGRATION_CLIENT_OPTIONS: MongoClientOptions = {
  serverSelectionTimeoutMS: 30_000,
  connectTimeoutMS: 10_000,
  socketTimeoutMS: 0,
};

/** Documents read and written per round trip of a backfill. */
const BATCH = 1000;

/**
 * A data migration: every document of `collection` that `filter` selects gets `compute(doc)`, a
 * batch at a time in `_id` order. Each write repeats the filter (and `guard(doc)`), so a document
 * the service changed meanwhile is left as the service wrote it, and two runs at once write the
 * same values: a second run finds nothing left to do.
 */
export interface Backfill {
  name: string;
  collection: string;
  filter: Filter<Document>;
  projection: Document;
  /** The fields to set, or null when the document is already right. */
  compute: (doc: Document) => Document | null;
  /** What must still hold of the document when it is written (the value compute read). */
  guard?: (doc: Document) => Filter<Document>;
}

export interface Migration {
  collections: readonly CollectionIndexes[];
  backfills: readonly Backfill[];
  /** Steps that are neither (the pets counter), each idempotent. */
  steps?: ReadonlyArray<{ name: string; run: (db: Db) => Promise<string> }>;
}

export type Progress = (line: string) => void;

async function runBackfill(db: Db, backfill: Backfill, progress: Progress): Promise<void> {
  // Documents of any _id type (ObjectId, string): the batches go in _id order whatever it is.
  const collection = db.collection(backfill.collection);
  let after: unknown;
  let scanned = 0;
  let updated = 0;
  for (;;) {
    const filter = (
      after === undefined ? backfill.filter : { $and: [backfill.filter, { _id: { $gt: after } }] }
    ) as Filter<Document>;
    const docs = await collection
      .find(filter, { projection: { ...backfill.projection, _id: 1 }, sort: { _id: 1 }, limit: BATCH })
      .toArray();
    if (docs.length === 0) break;
    after = docs.at(-1)?._id;
    scanned += docs.length;
    const writes: AnyBulkWriteOperation<Document>[] = [];
    for (const doc of docs) {
      const $set = backfill.compute(doc);
      if (!$set) continue;
      const guard = backfill.guard ? [backfill.guard(doc)] : [];
      const filter = { $and: [{ _id: doc._id }, backfill.filter, ...guard] } as Filter<Document>;
      writes.push({ updateOne: { filter, update: { $set } } });
    }
    if (writes.length > 0) updated += (await collection.bulkWrite(writes, { ordered: false })).modifiedCount;
    progress(`${backfill.collection}: ${backfill.name}: ${scanned} checked, ${updated} updated`);
  }
  progress(`${backfill.collection}: ${backfill.name}: done (${scanned} checked, ${updated} updated)`);
}

/**
 * Builds every index, runs every backfill and step, and checks the indexes are in place after.
 * Safe to run again and from two places at once: every part leaves alone what is already right.
 */
export async function runMigration(db: Db, migration: Migration, progress: Progress): Promise<void> {
  const before = await listIndexes(db, migration.collections);
  for (const collection of migration.collections) {
    const missing = indexesNotInPlace([collection], before);
    progress(
      missing.length === 0
        ? `${collection.collection}: ${collection.indexes.length} indexes in place`
        : `${collection.collection}: building ${missing.length} of ${collection.indexes.length} indexes: ${missing.join(', ')}`,
    );
    const started = Date.now();
    await createIndexes(db, collection, before.get(collection.collection) ?? []);
    if (missing.length > 0) progress(`${collection.collection}: indexes built in ${Date.now() - started} ms`);
  }
  for (const backfill of migration.backfills) await runBackfill(db, backfill, progress);
  for (const step of migration.steps ?? []) progress(`${step.name}: ${await step.run(db)}`);
  const after = indexesNotInPlace(migration.collections, await listIndexes(db, migration.collections));
  if (after.length > 0) throw new Error(`indexes still not in place after the migration: ${after.join(', ')}`);
}

/**
 * `<service> migrate`: connects with the migration's own timeouts, runs the migration with a line
 * per step on stdout, and answers the exit code (0 done, 1 not done, the reason on stderr in one line).
 */
export async function migrateCommand(
  service: string,
  target: { url: string; db: string },
  migration: Migration,
): Promise<number> {
  const client = new MongoClient(target.url, {
    ...MIGRATION_CLIENT_OPTIONS,
    appName: `animal-store-${service}-migrate`,
  });
  const progress: Progress = (line) => void process.stdout.write(`${service} migrate: ${line}\n`);
  const started = Date.now();
  try {
    progress(`database "${target.db}" at ${redactUrl(target.url)}`);
    await client.connect();
    await runMigration(client.db(target.db), migration, progress);
    progress(`done in ${Date.now() - started} ms`);
    return 0;
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    process.stderr.write(`${service} migrate: failed: ${reason.split('\n')[0]}\n`);
    return 1;
  } finally {
    await client.close().catch(() => {});
  }
}
