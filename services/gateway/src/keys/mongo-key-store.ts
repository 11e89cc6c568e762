import { ACCESS_WRITE, KEY_LOOKUP } from '@animal-store/common/mongo/options.js';
import type { Collection, Db, Filter, IndexDescription } from 'mongodb';
import { MongoServerError } from 'mongodb';
import { PLAN_CREDITS } from '../credits/credit-terms.js';
import { MONGO_ORDER, mongoPage, type Page, type PageRequest, startsWithPattern } from '../paging/page.js';
import type { ChangedKey, KeyChanges, KeyFilter, KeyRecord, KeyStore, Rotation } from './key-store.js';
import { DuplicateKeyError } from './key-store.js';

/** Timestamps are BSON dates in MongoDB (sortable, TTL-able); ISO text everywhere else. */
type KeyDocument = Omit<KeyRecord, 'createdAt' | 'revokedAt' | 'updatedAt' | 'expiresAt' | 'previous'> & {
  createdAt: Date;
  revokedAt?: Date;
  updatedAt?: Date;
  expiresAt?: Date;
  previous?: { sha256: string; expiresAt: Date };
  /**
   * The name lower-cased (JavaScript's toLowerCase), so a case-insensitive name search is an
   * anchored range on an index. Records written before it existed get it from `npm run migrate`.
   */
  nameLower?: string;
  /**
   * Whether revokedAt is set, on every document: a `revoked` page is then an equality on an index
   * (revoked_created_id) instead of an `$exists` walk over every key.
   */
  revoked?: boolean;
};

const PROJECTION = { _id: 0, nameLower: 0, revoked: 0 } as const;
const ORDER = MONGO_ORDER;

export const KEYS_COLLECTION = 'keys';

/**
 * Every index the store's queries use, as data: `npm run migrate` builds them, the gateway checks
 * them at start, and tests/mongo/server-rules.test.ts holds them to what MongoDB accepts.
 */
export const KEY_INDEXES: readonly IndexDescription[] = [
  { key: { id: 1 }, name: 'id_unique', unique: true },
  { key: { sha256: 1 }, name: 'sha256_unique', unique: true },
  {
    key: { 'previous.sha256': 1 },
    name: 'previous_sha256_unique',
    unique: true,
    partialFilterExpression: { 'previous.sha256': { $exists: true } },
  },
  { key: { updatedAt: 1 }, name: 'updatedAt', sparse: true },
  { key: { expiresAt: 1 }, name: 'expiresAt', sparse: true },
  {
    key: { customerId: 1, ...ORDER },
    name: 'customerId_created_id',
    partialFilterExpression: { customerId: { $exists: true } },
  },
  { key: ORDER, name: 'created_id' },
  // Equality, then the page order: a revoked=true (or false) page reads only its own keys.
  { key: { revoked: 1, ...ORDER }, name: 'revoked_created_id' },
  // A name or prefix search has two bounded paths, and the planner tries both and keeps the faster:
  // a range over the matching names, sorted in memory (few matches), or the page order with the
  // name and prefix read from the index, stopping at a page of matches (many matches).
  { key: { nameLower: 1, ...ORDER }, name: 'name_created_id' },
  { key: { ...ORDER, nameLower: 1, prefix: 1 }, name: 'created_id_name_prefix' },
  { key: { plan: 1, ...ORDER }, name: 'plan_created_id' },
  {
    key: { prefix: 1, ...ORDER },
    name: 'prefix_created_id',
    partialFilterExpression: { prefix: { $exists: true } },
  },
];

/**
 * The Mongo query for a filter; each field has an index that leads with it and ends in the page
 * order (customerId_created_id, revoked_created_id, name_created_id, plan_created_id,
 * prefix_created_id), and the name and prefix searches also created_id_name_prefix.
 */
function filterQuery(filter: KeyFilter): Filter<KeyDocument> {
  const query: Filter<KeyDocument> = {};
  if (filter.plan !== undefined) query.plan = { $eq: filter.plan };
  if (filter.customerId !== undefined) query.customerId = { $eq: filter.customerId };
  if (filter.revoked !== undefined) query.revoked = { $eq: filter.revoked };
  if (filter.name !== undefined) query.nameLower = { $regex: startsWithPattern(filter.name.toLowerCase()) };
  if (filter.prefix !== undefined) query.prefix = { $regex: startsWithPattern(filter.prefix) };
  return query;
}

function toRecord(doc: KeyDocument): KeyRecord {
  const { createdAt, revokedAt, updatedAt, expiresAt, previous, revoked: _, ...rest } = doc;
  return {
    ...rest,
    createdAt: createdAt.toISOString(),
    ...(expiresAt ? { expiresAt: expiresAt.toISOString() } : {}),
    ...(previous ? { previous: { sha256: previous.sha256, expiresAt: previous.expiresAt.toISOString() } } : {}),
    ...(updatedAt ? { updatedAt: updatedAt.toISOString() } : {}),
    ...(revokedAt ? { revokedAt: revokedAt.toISOString() } : {}),
  };
}

function toDocument(record: KeyRecord): KeyDocument {
  const { createdAt, revokedAt, updatedAt, expiresAt, previous, ...rest } = record;
  return {
    ...rest,
    nameLower: record.name.toLowerCase(),
    revoked: revokedAt !== undefined,
    createdAt: new Date(createdAt),
    ...(expiresAt ? { expiresAt: new Date(expiresAt) } : {}),
    ...(previous ? { previous: { sha256: previous.sha256, expiresAt: new Date(previous.expiresAt) } } : {}),
    ...(updatedAt ? { updatedAt: new Date(updatedAt) } : {}),
    ...(revokedAt ? { revokedAt: new Date(revokedAt) } : {}),
  };
}

function isDuplicate(err: unknown): boolean {
  return err instanceof MongoServerError && err.code === 11000;
}

/** Key records in MongoDB (db "gateway", collection "keys"), unique on id and on each secret's hash. */
export class MongoKeyStore implements KeyStore {
  readonly kind = 'mongo' as const;
  private readonly keys: Collection<KeyDocument>;

  constructor(private readonly db: Db) {
    this.keys = db.collection<KeyDocument>(KEYS_COLLECTION);
  }

  async insert(record: KeyRecord): Promise<void> {
    try {
      // Every write here decides access: w: "majority", or an election can roll it back (ACCESS_WRITE).
      await this.keys.insertOne(toDocument(record), ACCESS_WRITE);
    } catch (err) {
      if (isDuplicate(err)) throw new DuplicateKeyError();
      throw err;
    }
  }

  async findByHash(sha256: string): Promise<KeyRecord | null> {
    const doc = await this.keys.findOne(
      { $or: [{ sha256: { $eq: sha256 } }, { 'previous.sha256': { $eq: sha256 } }] },
      // The request path's lookup: served by a secondary during an election (KEY_LOOKUP).
      { projection: PROJECTION, ...KEY_LOOKUP },
    );
    return doc ? toRecord(doc) : null;
  }

  async get(id: string): Promise<KeyRecord | null> {
    const doc = await this.keys.findOne({ id: { $eq: id } }, { projection: PROJECTION });
    return doc ? toRecord(doc) : null;
  }

  async getMany(ids: readonly string[]): Promise<KeyRecord[]> {
    const out: KeyRecord[] = [];
    // Bounded batches: one $in of a million ids would pass the 16 MB command limit.
    for (let i = 0; i < ids.length; i += 1000) {
      const batch = ids.slice(i, i + 1000);
      const docs = await this.keys.find({ id: { $in: batch } }, { projection: PROJECTION }).toArray();
      out.push(...docs.map(toRecord));
    }
    return out;
  }

  page(filter: KeyFilter, request: PageRequest): Promise<Page<KeyRecord>> {
    return mongoPage(this.keys, filterQuery(filter), request, { projection: PROJECTION, toRecord });
  }

  async expiringBetween(from: Date, to: Date): Promise<KeyRecord[]> {
    const docs = await this.keys
      .find({ expiresAt: { $gte: from, $lte: to }, revokedAt: { $exists: false } }, { projection: PROJECTION })
      .toArray();
    return docs.map(toRecord);
  }

  async liveKeysOf(customerId: string): Promise<KeyRecord[]> {
    const docs = await this.keys
      .find(
        { customerId: { $eq: customerId }, revokedAt: { $exists: false } },
        { projection: PROJECTION, sort: { createdAt: 1 } },
      )
      .toArray();
    return docs.map(toRecord);
  }

  async update(id: string, changes: KeyChanges, at: Date): Promise<KeyRecord | null> {
    if (changes.expiresAt !== undefined) return this.updateExpiry(id, changes, changes.expiresAt, at);
    const $set: Record<string, unknown> = { updatedAt: at };
    const $unset: Record<string, ''> = {};
    if (changes.plan !== undefined) $set.plan = changes.plan;
    if (changes.name !== undefined) {
      $set.name = changes.name;
      $set.nameLower = changes.name.toLowerCase();
    }
    if (changes.limits === null) $unset.limits = '';
    else if (changes.limits !== undefined) {
      $set.limits = { ...changes.limits };
    }
    for (const field of ['scopes', 'allowedCidrs'] as const) {
      const value = changes[field];
      if (value === null) $unset[field] = '';
      else if (value !== undefined) $set[field] = [...value];
    }
    if (changes.customerId === null) $unset.customerId = '';
    else if (changes.customerId !== undefined) $set.customerId = changes.customerId;
    // null is kept: it turns the plan's credits off for this key; 'plan' drops its own.
    if (changes.credits === PLAN_CREDITS) $unset.credits = '';
    else if (changes.credits !== undefined) $set.credits = changes.credits === null ? null : { ...changes.credits };
    if (changes.expiresAt === null) $unset.expiresAt = '';
    else if (changes.expiresAt !== undefined) $set.expiresAt = new Date(changes.expiresAt);
    const doc = await this.keys.findOneAndUpdate(
      { id: { $eq: id }, revokedAt: { $exists: false } },
      Object.keys($unset).length > 0 ? { $set, $unset } : { $set },
      // Plan, limits, scopes, addresses, owner: a rolled-back change would hand access back.
      { returnDocument: 'after', projection: PROJECTION, ...ACCESS_WRITE },
    );
    return doc ? toRecord(doc) : null;
  }

  /**
   * An update that changes the expiry, as applyChanges does it: a pipeline reads the old expiry
   * and folds it into the previous secret's end in the same atomic step (within one $set stage,
   * `$expiresAt` is the value before the stage). Client text goes in as $literal: a name like
   * "$sha256" would otherwise be read as a field path.
   */
  private async updateExpiry(
    id: string,
    changes: KeyChanges,
    expiresAt: string | null,
    at: Date,
  ): Promise<KeyRecord | null> {
    const $set: Record<string, unknown> = {
      updatedAt: at,
      expiresAt: expiresAt === null ? '$$REMOVE' : new Date(expiresAt),
      previous: {
        $cond: [
          { $eq: [{ $type: '$previous' }, 'missing'] },
          '$$REMOVE',
          // $min skips a missing expiresAt: the previous secret's own end then stands.
          { sha256: '$previous.sha256', expiresAt: { $min: ['$previous.expiresAt', '$expiresAt'] } },
        ],
      },
    };
    if (changes.plan !== undefined) $set.plan = { $literal: changes.plan };
    if (changes.name !== undefined) {
      $set.name = { $literal: changes.name };
      $set.nameLower = { $literal: changes.name.toLowerCase() };
    }
    if (changes.limits === null) $set.limits = '$$REMOVE';
    else if (changes.limits !== undefined) $set.limits = { $literal: { ...changes.limits } };
    for (const field of ['scopes', 'allowedCidrs'] as const) {
      const value = changes[field];
      if (value === null) $set[field] = '$$REMOVE';
      else if (value !== undefined) $set[field] = { $literal: [...value] };
    }
    if (changes.customerId === null) $set.customerId = '$$REMOVE';
    else if (changes.customerId !== undefined) $set.customerId = { $literal: changes.customerId };
    if (changes.credits === PLAN_CREDITS) $set.credits = '$$REMOVE';
    else if (changes.credits !== undefined) $set.credits = { $literal: changes.credits };
    const doc = await this.keys.findOneAndUpdate({ id: { $eq: id }, revokedAt: { $exists: false } }, [{ $set }], {
      returnDocument: 'after',
      projection: PROJECTION,
      ...ACCESS_WRITE,
    });
    return doc ? toRecord(doc) : null;
  }

  async rotate(id: string, rotation: Rotation, at: Date): Promise<KeyRecord | null> {
    try {
      // A pipeline update reads the current hash and writes the new one in one atomic step, so
      // two rotations at once cannot both keep the same secret as "previous".
      const doc = await this.keys.findOneAndUpdate(
        {
          id: { $eq: id },
          revokedAt: { $exists: false },
          ...(rotation.from === undefined ? {} : { sha256: { $eq: rotation.from } }),
        },
        [
          {
            $set: {
              previous: { sha256: '$sha256', expiresAt: new Date(rotation.previousExpiresAt) },
              sha256: { $literal: rotation.sha256 },
              prefix: rotation.prefix === undefined ? '$$REMOVE' : { $literal: rotation.prefix },
              updatedAt: at,
            },
          },
        ],
        // A rolled-back rotation would bring the old secret back as the current one.
        { returnDocument: 'after', projection: PROJECTION, ...ACCESS_WRITE },
      );
      return doc ? toRecord(doc) : null;
    } catch (err) {
      if (isDuplicate(err)) throw new DuplicateKeyError();
      throw err;
    }
  }

  async revoke(id: string, at: Date): Promise<boolean> {
    const result = await this.keys.updateOne(
      { id: { $eq: id }, revokedAt: { $exists: false } },
      { $set: { revoked: true, revokedAt: at, updatedAt: at } },
      // Under w: 1 a failover can roll an acknowledged revoke back and bring the revoked key back.
      ACCESS_WRITE,
    );
    return result.modifiedCount === 1;
  }

  async changedSince(since: Date): Promise<ChangedKey[]> {
    const docs = await this.keys
      .find({ updatedAt: { $gt: since } }, { projection: { _id: 0, id: 1, sha256: 1, updatedAt: 1 } })
      .toArray();
    return docs.map((d) => ({ id: d.id, sha256: d.sha256, updatedAt: d.updatedAt?.toISOString() }));
  }

  async ping(): Promise<void> {
    await this.db.command({ ping: 1 });
  }
}
