import { LIST_MAX_TIME_MS } from '@animal-store/common/mongo/options.js';
import {
  type Collection,
  type Db,
  type Filter,
  type IndexDescription,
  type MongoClientOptions,
  MongoServerError,
} from 'mongodb';
import type { NewPet, Pet } from '../schemas.js';
import { withStoreErrors } from './errors.js';
import { type ListOptions, type PetStore, toPet } from './pet-store.js';

/**
 * The driver's defaults wait 30 s to find a server; with MongoDB down a request should fail
 * within about two seconds with a 503, so the gateway and the client can move on.
 */
export const mongoClientOptions: MongoClientOptions = {
  appName: 'animal-store-pets',
  serverSelectionTimeoutMS: 2_000,
  connectTimeoutMS: 2_000,
  socketTimeoutMS: 10_000,
  waitQueueTimeoutMS: 2_000,
};

export const PETS_COLLECTION = 'pets';
export const COUNTERS_COLLECTION = 'counters';
/** The counter document of pet ids in COUNTERS_COLLECTION. */
export const PETS_COUNTER = 'pets';

/** Every index the store's queries use, as data: `npm run migrate` builds them, the service checks them at start. */
export const PET_INDEXES: readonly IndexDescription[] = [
  { key: { id: 1 }, name: 'id_unique', unique: true },
  // Serves the status filter in id order without a sort in memory.
  { key: { status: 1, id: 1 }, name: 'status_id' },
];

interface Counter {
  _id: string;
  seq: number;
}

const DUPLICATE_KEY = 11000;

function isDuplicateKey(err: unknown): boolean {
  return err instanceof MongoServerError && err.code === DUPLICATE_KEY;
}

/** Ids one create tries before it gives up: the first, and one after each catch-up of the counter. */
export const CREATE_ATTEMPTS = 3;

/** The steps of a create, apart from MongoDB so the recovery below is one piece of logic. */
export interface CreateSteps {
  /** The counter's next id. */
  nextId(): Promise<number>;
  /** Inserts the pet under that id; a duplicate key when the id is taken. */
  insert(id: number): Promise<void>;
  /** Raises the counter to the highest id in use, so the next id is free. */
  catchUp(): Promise<void>;
}

/**
 * Inserts under the counter's next id. A counter behind the pets (a restore of `pets` without
 * `counters`, a counter dropped by hand) hands out ids in use: the insert meets the unique index
 * (E11000), the counter is raised past the highest id and the create tries again, at most
 * CREATE_ATTEMPTS ids in all. Without this every create was a 500 until someone fixed the counter.
 */
export async function insertUnderFreshId(steps: CreateSteps, attempts = CREATE_ATTEMPTS): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const id = await steps.nextId();
    try {
      await steps.insert(id);
      return id;
    } catch (err) {
      if (!isDuplicateKey(err) || attempt >= attempts) throw err;
      await steps.catchUp();
    }
  }
}

/**
 * Pets in MongoDB: collection `pets` with a unique index on `id`, ids from a counter document
 * in `counters`. Ids can have gaps (a failed insert burns one) but never repeat or go back.
 */
export class MongoPetStore implements PetStore {
  private readonly pets: Collection<Pet>;
  private readonly counters: Collection<Counter>;

  constructor(private readonly db: Db) {
    this.pets = db.collection<Pet>(PETS_COLLECTION);
    this.counters = db.collection<Counter>(COUNTERS_COLLECTION);
  }

  create(newPet: NewPet): Promise<Pet> {
    return withStoreErrors(async () => {
      const id = await insertUnderFreshId({
        nextId: () => this.nextId(),
        // A new object each time: insertOne adds an _id to the object it is given.
        insert: async (id) => void (await this.pets.insertOne(toPet(id, newPet))),
        catchUp: () => this.catchUpCounter(),
      });
      return toPet(id, newPet);
    });
  }

  /** Raises the counter to the highest id in use ($max never lowers it, so concurrent catch-ups agree). */
  private async catchUpCounter(): Promise<void> {
    // The id_unique index read backwards: one key, however many pets.
    const highest = await this.pets
      .find({}, { projection: { _id: 0, id: 1 } })
      .sort({ id: -1 })
      .limit(1)
      .next();
    await this.counters.updateOne({ _id: 'pets' }, { $max: { seq: highest?.id ?? 0 } }, { upsert: true });
  }

  get(id: number): Promise<Pet | null> {
    return withStoreErrors(() => this.pets.findOne<Pet>({ id }, { projection: { _id: 0 } }));
  }

  list({ limit, status, after, ids }: ListOptions): Promise<Pet[]> {
    const filter: Filter<Pet> = {};
    if (status !== undefined) filter.status = status;
    if (after !== undefined || ids !== undefined) {
      filter.id = {
        ...(after !== undefined ? { $gt: after } : {}),
        ...(ids !== undefined ? { $in: [...ids] } : {}),
      };
    }
    return withStoreErrors(() =>
      // A page the server cannot serve in time answers code 50 (a 503) rather than scan on.
      this.pets
        .find(filter, { maxTimeMS: LIST_MAX_TIME_MS })
        .project<Pet>({ _id: 0 })
        .sort({ id: 1 })
        .limit(limit)
        .toArray(),
    );
  }

  async ping(): Promise<void> {
    await withStoreErrors(() => this.db.command({ ping: 1 }));
  }

  private async nextId(): Promise<number> {
    for (let attempt = 1; ; attempt++) {
      try {
        const counter = await this.counters.findOneAndUpdate(
          { _id: PETS_COUNTER },
          { $inc: { seq: 1 } },
          { upsert: true, returnDocument: 'after' },
        );
        if (!counter) throw new Error('the pets counter upsert returned no document');
        return counter.seq;
      } catch (err) {
        // Two first-ever upserts can race to insert the counter; the loser may see a duplicate
        // key (servers retry this themselves since 4.2, older ones do not). Once is enough.
        if (attempt === 1 && isDuplicateKey(err)) continue;
        throw err;
      }
    }
  }
}
