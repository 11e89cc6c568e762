import type { CollectionIndexes } from '@animal-store/common/mongo/indexes.js';
import type { Backfill, Migration } from '@animal-store/common/mongo/migrate.js';
import type { Document } from 'mongodb';
import { CUSTOMER_INDEXES, CUSTOMERS_COLLECTION } from './customers/mongo-customer-store.js';
import { KEY_INDEXES, KEYS_COLLECTION } from './keys/mongo-key-store.js';

/** What the gateway's MongoDB stores need: checked at start, built by `npm run migrate`. */
export const GATEWAY_INDEXES: readonly CollectionIndexes[] = [
  { collection: KEYS_COLLECTION, indexes: KEY_INDEXES },
  { collection: CUSTOMERS_COLLECTION, indexes: CUSTOMER_INDEXES },
];

/** Any character outside ASCII: where MongoDB's `$toLower` (ASCII only) and JavaScript's differ. */
const NON_ASCII = '[^\\x00-\\x7F]';

/**
 * `nameLower` as the stores write it (JavaScript's toLowerCase, what a search lower-cases with):
 * for documents written before it existed, and for non-ASCII names an earlier server-side
 * `$toLower` lower-cased only in part. A name changed meanwhile is left to the store's own write.
 */
function nameLowerBackfill(collection: string): Backfill {
  return {
    name: 'nameLower',
    collection,
    filter: { $or: [{ nameLower: { $exists: false } }, { name: { $regex: NON_ASCII } }] },
    projection: { name: 1, nameLower: 1 },
    compute: (doc: Document) => {
      if (typeof doc.name !== 'string') return null;
      const nameLower = doc.name.toLowerCase();
      return doc.nameLower === nameLower ? null : { nameLower };
    },
    guard: (doc: Document) => ({ name: { $eq: doc.name } }),
  };
}

/**
 * A boolean beside a date that may be absent (`revoked` beside `revokedAt`), on every document,
 * so a list filter is an index equality: for documents written before the flag existed.
 */
function flagBackfill(collection: string, flag: string, date: string): Backfill {
  return {
    name: flag,
    collection,
    filter: { [flag]: { $exists: false } },
    projection: { [date]: 1 },
    compute: (doc: Document) => ({ [flag]: doc[date] !== undefined && doc[date] !== null }),
  };
}

export const GATEWAY_MIGRATION: Migration = {
  collections: GATEWAY_INDEXES,
  backfills: [
    nameLowerBackfill(KEYS_COLLECTION),
    flagBackfill(KEYS_COLLECTION, 'revoked', 'revokedAt'),
    nameLowerBackfill(CUSTOMERS_COLLECTION),
    flagBackfill(CUSTOMERS_COLLECTION, 'deleted', 'deletedAt'),
  ],
};
