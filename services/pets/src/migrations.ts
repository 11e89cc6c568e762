import type { CollectionIndexes } from '@animal-store/common/mongo/indexes.js';
import type { Migration } from '@animal-store/common/mongo/migrate.js';
import { type Db, MongoServerError } from 'mongodb';
import { COUNTERS_COLLECTION, PET_INDEXES, PETS_COLLECTION, PETS_COUNTER } from './store/mongo-pet-store.js';

/** What the pets store needs: checked at start, built by `npm run migrate`. `counters` uses `_id` only. */
export const PETS_INDEXES: readonly CollectionIndexes[] = [{ collection: PETS_COLLECTION, indexes: PET_INDEXES }];

/**
 * The id counter at least the highest id stored (after a restore of `pets` without `counters`,
 * every create would otherwise collide): `$max` only ever raises it, so a run beside live creates,
 * or beside another run, cannot take it back.
 */
async function counterPastHighestId(db: Db): Promise<string> {
  const [highest] = await db
    .collection(PETS_COLLECTION)
    .find({}, { projection: { _id: 0, id: 1 }, sort: { id: -1 }, limit: 1 })
    .toArray();
  if (typeof highest?.id !== 'number') return 'no pets, nothing to do';
  const raise = () =>
    db
      .collection<{ _id: string; seq: number }>(COUNTERS_COLLECTION)
      .updateOne({ _id: PETS_COUNTER }, { $max: { seq: highest.id } }, { upsert: true });
  try {
    await raise();
  } catch (err) {
    // Two first upserts at once: the loser sees a duplicate key and the document then exists.
    if (!(err instanceof MongoServerError) || err.code !== 11000) throw err;
    await raise();
  }
  return `at least ${highest.id}, the highest id`;
}

export const PETS_MIGRATION: Migration = {
  collections: PETS_INDEXES,
  backfills: [],
  steps: [{ name: `${COUNTERS_COLLECTION}: ${PETS_COUNTER}`, run: counterPastHighestId }],
};
