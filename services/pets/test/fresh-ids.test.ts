import { MongoServerError } from 'mongodb';
import { describe, expect, it } from 'vitest';
import { CREATE_ATTEMPTS, type CreateSteps, insertUnderFreshId } from '../src/store/mongo-pet-store.js';

/*
 * The pets counter behind the pets (a restore of `pets` without `counters`): the logic of a create
 * that meets its id taken. The steps stand for the counter and the unique index on `id`; the
 * duplicate key is the driver's own error as an insert raises it. The real path runs in
 * mongo-store.test.ts wherever a MongoDB exists.
 */
function pets(taken: number[], counter = 0) {
  const ids = new Set(taken);
  const calls = { inserts: 0, catchUps: 0 };
  const steps: CreateSteps = {
    nextId: async () => ++counter,
    insert: async (id) => {
      calls.inserts++;
      if (ids.has(id)) {
        throw new MongoServerError({ message: `E11000 duplicate key error dup key: { id: ${id} }`, code: 11000 });
      }
      ids.add(id);
    },
    catchUp: async () => {
      calls.catchUps++;
      counter = Math.max(counter, ...ids);
    },
  };
  return { steps, calls, ids };
}

describe('a create whose id is taken', () => {
  it('raises the counter past the highest id and takes the next one', async () => {
    const store = pets([1, 2, 3, 4, 5]);
    expect(await insertUnderFreshId(store.steps)).toBe(6);
    expect(store.calls).toEqual({ inserts: 2, catchUps: 1 });
    // Caught up: the next create needs no recovery.
    expect(await insertUnderFreshId(store.steps)).toBe(7);
    expect(store.calls).toEqual({ inserts: 3, catchUps: 1 });
  });

  it('gives up after CREATE_ATTEMPTS ids, with the duplicate key, when the counter cannot catch up', async () => {
    const store = pets([1, 2, 3, 4, 5]);
    store.steps.catchUp = async () => {};
    await expect(insertUnderFreshId(store.steps)).rejects.toMatchObject({ code: 11000 });
    expect(store.calls.inserts).toBe(CREATE_ATTEMPTS);
  });

  it('passes any other failure on at once', async () => {
    const store = pets([]);
    const down = new MongoServerError({ message: 'not primary', code: 10107 });
    store.steps.insert = () => Promise.reject(down);
    await expect(insertUnderFreshId(store.steps)).rejects.toBe(down);
    expect(store.calls.catchUps).toBe(0);
  });
});
