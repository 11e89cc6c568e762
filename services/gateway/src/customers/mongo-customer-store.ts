import { ACCESS_WRITE, KEY_LOOKUP } from '@animal-store/common/mongo/options.js';
import type { Collection, Db, Filter, IndexDescription } from 'mongodb';
import { MongoServerError } from 'mongodb';
import { PLAN_CREDITS } from '../credits/credit-terms.js';
import { MONGO_ORDER, mongoPage, type Page, type PageRequest, startsWithPattern } from '../paging/page.js';
import {
  type ChangedCustomer,
  type CustomerChanges,
  type CustomerFilter,
  type CustomerRecord,
  type CustomerStore,
  DuplicateCustomerError,
} from './customer-store.js';

/**
 * Timestamps are BSON dates (sortable); `nameLower` is kept beside `name` so a case-insensitive
 * prefix search is an anchored range on an index instead of a collection scan. `deleted` is on
 * every document (false while live) because a partial index can select `deleted: false` but not
 * a missing `deletedAt`: MongoDB refuses `$exists: false` in a partialFilterExpression.
 */
type CustomerDocument = Omit<CustomerRecord, 'createdAt' | 'updatedAt' | 'deletedAt'> & {
  nameLower: string;
  deleted: boolean;
  createdAt: Date;
  updatedAt?: Date;
  deletedAt?: Date;
};

const PROJECTION = { _id: 0, nameLower: 0, deleted: 0 } as const;
const ORDER = MONGO_ORDER;
/** The live customers: every read and write but changedSince goes through it. */
const LIVE = { deleted: { $eq: false } } as const;

export const CUSTOMERS_COLLECTION = 'customers';

/**
 * Every index the store's queries use, as data: `npm run migrate` builds them, the gateway checks
 * them at start, and tests/mongo/server-rules.test.ts holds them to what MongoDB accepts.
 */
export const CUSTOMER_INDEXES: readonly IndexDescription[] = [
  { key: { id: 1 }, name: 'id_unique', unique: true },
  // One live customer per externalId; a deleted one frees it. Only equality, $exists: true,
  // $gt/$gte/$lt/$lte, $type and a top-level $and are accepted here on every supported server
  // (https://www.mongodb.com/docs/v6.0/core/index-partial/), hence `deleted: false`.
  {
    key: { externalId: 1 },
    name: 'externalId_live_unique',
    unique: true,
    partialFilterExpression: { externalId: { $exists: true }, deleted: { $eq: false } },
  },
  // Every list reads live customers (`deleted: false`), so each of its indexes leads with `deleted`.
  // The unfiltered list: equality, then the page order; a name search can walk it in that order too,
  // reading the name from the index and stopping at a page of matches (a common prefix).
  { key: { deleted: 1, ...ORDER, nameLower: 1 }, name: 'live_created_id_name' },
  // A name search as a range over the matching names, sorted in memory (a rare prefix): the
  // planner tries both and keeps the faster.
  { key: { deleted: 1, nameLower: 1, ...ORDER }, name: 'live_name_created_id' },
  // Two equalities, then the page order. An externalId is at most one live customer: externalId_live_unique.
  { key: { deleted: 1, plan: 1, ...ORDER }, name: 'live_plan_created_id' },
  { key: { updatedAt: 1 }, name: 'updatedAt', sparse: true },
];

function toRecord(doc: CustomerDocument): CustomerRecord {
  const { createdAt, updatedAt, deletedAt, nameLower: _, deleted: _deleted, ...rest } = doc;
  return {
    ...rest,
    createdAt: createdAt.toISOString(),
    ...(updatedAt ? { updatedAt: updatedAt.toISOString() } : {}),
    ...(deletedAt ? { deletedAt: deletedAt.toISOString() } : {}),
  };
}

function toDocument(record: CustomerRecord): CustomerDocument {
  const { createdAt, updatedAt, deletedAt, ...rest } = record;
  return {
    ...rest,
    nameLower: record.name.toLowerCase(),
    deleted: deletedAt !== undefined,
    createdAt: new Date(createdAt),
    ...(updatedAt ? { updatedAt: new Date(updatedAt) } : {}),
    ...(deletedAt ? { deletedAt: new Date(deletedAt) } : {}),
  };
}

/** The index a duplicate-key error came from tells which field was taken. */
function duplicateOf(err: unknown): DuplicateCustomerError | null {
  if (!(err instanceof MongoServerError) || err.code !== 11000) return null;
  return new DuplicateCustomerError(String(err.message).includes('externalId') ? 'externalId' : 'id');
}

/** Customers in MongoDB (db "gateway", collection "customers"). */
export class MongoCustomerStore implements CustomerStore {
  readonly kind = 'mongo' as const;
  private readonly customers: Collection<CustomerDocument>;

  constructor(db: Db) {
    this.customers = db.collection<CustomerDocument>(CUSTOMERS_COLLECTION);
  }

  async insert(record: CustomerRecord): Promise<void> {
    try {
      // A customer's terms decide its keys' access: w: "majority", or an election can roll it back (ACCESS_WRITE).
      await this.customers.insertOne(toDocument(record), ACCESS_WRITE);
    } catch (err) {
      throw duplicateOf(err) ?? err;
    }
  }

  async get(id: string): Promise<CustomerRecord | null> {
    // The gate asks this for an uncached key's customer: served by a secondary during an election (KEY_LOOKUP).
    const doc = await this.customers.findOne({ id: { $eq: id }, ...LIVE }, { projection: PROJECTION, ...KEY_LOOKUP });
    return doc ? toRecord(doc) : null;
  }

  list(filter: CustomerFilter, page: PageRequest): Promise<Page<CustomerRecord>> {
    const query: Filter<CustomerDocument> = { ...LIVE };
    if (filter.plan !== undefined) query.plan = { $eq: filter.plan };
    if (filter.externalId !== undefined) query.externalId = { $eq: filter.externalId };
    if (filter.name !== undefined) query.nameLower = { $regex: startsWithPattern(filter.name.toLowerCase()) };
    return mongoPage(this.customers, query, page, { projection: PROJECTION, toRecord });
  }

  async update(id: string, changes: CustomerChanges, at: Date): Promise<CustomerRecord | null> {
    const $set: Record<string, unknown> = { updatedAt: at };
    const $unset: Record<string, ''> = {};
    if (changes.name !== undefined) {
      $set.name = changes.name;
      $set.nameLower = changes.name.toLowerCase();
    }
    if (changes.plan !== undefined) $set.plan = changes.plan;
    if (changes.billing !== undefined) $set.billing = { ...changes.billing };
    // null is kept: it turns the plan's credits off for this customer; 'plan' drops its own.
    if (changes.credits === PLAN_CREDITS) $unset.credits = '';
    else if (changes.credits !== undefined) $set.credits = changes.credits === null ? null : { ...changes.credits };
    for (const field of ['limits', 'externalId', 'metadata'] as const) {
      const value = changes[field];
      if (value === null) $unset[field] = '';
      else if (value !== undefined) $set[field] = typeof value === 'string' ? value : { ...value };
    }
    try {
      const doc = await this.customers.findOneAndUpdate(
        { id: { $eq: id }, ...LIVE },
        Object.keys($unset).length > 0 ? { $set, $unset } : { $set },
        // Plan, limits, credits: a rolled-back change would hand back what was taken away.
        { returnDocument: 'after', projection: PROJECTION, ...ACCESS_WRITE },
      );
      return doc ? toRecord(doc) : null;
    } catch (err) {
      throw duplicateOf(err) ?? err;
    }
  }

  async delete(id: string, at: Date): Promise<boolean> {
    const result = await this.customers.updateOne(
      { id: { $eq: id }, ...LIVE },
      { $set: { deleted: true, deletedAt: at, updatedAt: at } },
      // A rolled-back deletion would bring the customer and its shared windows back.
      ACCESS_WRITE,
    );
    return result.modifiedCount === 1;
  }

  async changedSince(since: Date): Promise<ChangedCustomer[]> {
    const docs = await this.customers
      .find({ updatedAt: { $gt: since } }, { projection: { _id: 0, id: 1, updatedAt: 1 } })
      .toArray();
    return docs.map((doc) => ({ id: doc.id, ...(doc.updatedAt ? { updatedAt: doc.updatedAt.toISOString() } : {}) }));
  }

  async ping(): Promise<void> {
    await this.customers.db.command({ ping: 1 });
  }
}
