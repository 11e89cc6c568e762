// The start-up check without a server: which needed indexes a listIndexes answer lacks, and the
// one line a service prints then. (The listIndexes call itself runs in the MongoDB suites.)
import { Double, Int32 } from 'mongodb';
import { describe, expect, it } from 'vitest';
import { type CollectionIndexes, indexesNotInPlace, indexesNotInPlaceLine } from '../../src/mongo/indexes.js';

const NEEDED: CollectionIndexes[] = [
  {
    collection: 'keys',
    indexes: [
      { key: { id: 1 }, name: 'id_unique', unique: true },
      { key: { revoked: 1, createdAt: -1, id: -1 }, name: 'revoked_created_id' },
      {
        key: { prefix: 1 },
        name: 'prefix',
        partialFilterExpression: { prefix: { $exists: true } },
      },
    ],
  },
  { collection: 'customers', indexes: [{ key: { id: 1 }, name: 'id_unique', unique: true }] },
];

/** A collection's indexes as listIndexes answers them: with `v` and the `_id_` index. */
const listed = (...indexes: object[]) => [
  { v: 2, key: { _id: 1 }, name: '_id_' },
  ...indexes.map((i) => ({ v: 2, ...i })),
];

const ALL_KEYS = listed(
  { key: { id: 1 }, name: 'id_unique', unique: true },
  { key: { revoked: 1, createdAt: -1, id: -1 }, name: 'revoked_created_id' },
  { key: { prefix: 1 }, name: 'prefix', partialFilterExpression: { prefix: { $exists: true } } },
);

describe('indexesNotInPlace', () => {
  it('finds nothing missing when every needed index is listed as defined', () => {
    const answer = new Map([
      ['keys', ALL_KEYS],
      ['customers', listed({ key: { id: 1 }, name: 'id_unique', unique: true })],
    ]);
    expect(indexesNotInPlace(NEEDED, answer)).toEqual([]);
  });

  it('reads numbers as numbers, whatever BSON type the server answers them in', () => {
    const answer = new Map([
      [
        'keys',
        listed(
          { key: { id: new Int32(1) }, name: 'id_unique', unique: true },
          { key: { revoked: new Double(1), createdAt: new Int32(-1), id: -1 }, name: 'revoked_created_id' },
          { key: { prefix: 1 }, name: 'prefix', partialFilterExpression: { prefix: { $exists: true } } },
        ),
      ],
      ['customers', listed({ key: { id: 1 }, name: 'id_unique', unique: true })],
    ]);
    expect(indexesNotInPlace(NEEDED, answer)).toEqual([]);
  });

  it('names every index of a collection that does not exist yet (listIndexes: none)', () => {
    expect(indexesNotInPlace(NEEDED, new Map())).toEqual([
      'keys.id_unique (missing)',
      'keys.revoked_created_id (missing)',
      'keys.prefix (missing)',
      'customers.id_unique (missing)',
    ]);
  });

  it('tells an index of the needed name but another key, order or options from a missing one', () => {
    const answer = new Map([
      [
        'keys',
        listed(
          { key: { id: 1 }, name: 'id_unique' },
          // The same fields in another order are another index: the page order needs this one.
          { key: { createdAt: -1, revoked: 1, id: -1 }, name: 'revoked_created_id' },
          { key: { prefix: 1 }, name: 'prefix', sparse: true },
        ),
      ],
      ['customers', listed({ key: { id: 1 }, name: 'id_unique', unique: true })],
    ]);
    expect(indexesNotInPlace(NEEDED, answer)).toEqual([
      'keys.id_unique (has other options (unique))',
      'keys.revoked_created_id (has another key)',
      'keys.prefix (has other options (sparse))',
    ]);
  });

  it('takes unique: false as no unique option, as a server lists it', () => {
    const needed: CollectionIndexes[] = [{ collection: 'c', indexes: [{ key: { a: 1 }, name: 'a', unique: false }] }];
    expect(indexesNotInPlace(needed, new Map([['c', listed({ key: { a: 1 }, name: 'a' })]]))).toEqual([]);
  });
});

describe('the line a service prints when indexes are not in place', () => {
  it('names the database, the first indexes, how many more, and the command that builds them', () => {
    const problems = indexesNotInPlace(NEEDED, new Map());
    const line = indexesNotInPlaceLine(
      'gateway',
      'mongodb://ops:***@db.example:27017/animal-store',
      'animal-store',
      problems,
    );
    expect(line).toBe(
      'MONGO_URL=mongodb://ops:***@db.example:27017/animal-store: database "animal-store" lacks the indexes gateway ' +
        'needs: keys.id_unique (missing), keys.revoked_created_id (missing), keys.prefix (missing), ' +
        'customers.id_unique (missing); run `npm run migrate` with this MONGO_URL (Kubernetes: the migrate Job; ' +
        'compose: the migrate-gateway service) and start again',
    );
    expect(line).not.toContain('\n');
    const many = indexesNotInPlaceLine('pets', 'mongodb://h/', 'pets', [...problems, 'customers.b (missing)']);
    expect(many).toContain('customers.id_unique (missing) and 1 more; run `npm run migrate`');
  });
});
