import type { Page, PageRequest } from '../paging/page.js';
import type { RedisClient } from '../redis/clients.js';
import { createdMember, type RecordEntries, RedisRecords } from '../redis/redis-records.js';
import {
  applyChanges,
  type ChangedKey,
  DuplicateKeyError,
  type KeyChanges,
  type KeyFilter,
  type KeyRecord,
  type KeyStore,
  keyMatches,
  type Rotation,
} from './key-store.js';

/** The sorted sets of `<prefix>{keys}:`: list order, name and shown-prefix search, customers, expiry, changes. */
const INDEXES = ['created', 'name', 'prefix', 'customer', 'expiry', 'changed'] as const;

/**
 * Where a key appears. Both its secrets' hashes are unique (the one lookup of every request);
 * revoked keys stay findable by hash and listed, as in the other stores, but leave the expiry
 * index (no notice for them).
 */
function entriesOf(record: KeyRecord): RecordEntries {
  const sorted: RecordEntries['sorted'] = [
    ['created', createdMember(record)],
    ['name', `${record.name.toLowerCase()} ${record.id}`],
  ];
  if (record.prefix !== undefined) sorted.push(['prefix', `${record.prefix} ${record.id}`]);
  if (record.customerId !== undefined) sorted.push(['customer', `${record.customerId} ${createdMember(record)}`]);
  if (record.expiresAt !== undefined && record.revokedAt === undefined) {
    sorted.push(['expiry', record.id, Date.parse(record.expiresAt)]);
  }
  if (record.updatedAt !== undefined) sorted.push(['changed', record.id, Date.parse(record.updatedAt)]);
  return { unique: [record.sha256, ...(record.previous ? [record.previous.sha256] : [])], sorted };
}

/**
 * Key records in Redis (`<prefix>{keys}:…`, one Cluster slot), for a gateway with Redis and no
 * MongoDB: durable as the credit ledger beside them is (Redis persisting, docs/redis.md).
 */
export class RedisKeyStore implements KeyStore {
  readonly kind = 'redis' as const;
  private readonly records: RedisRecords<KeyRecord>;

  constructor(redis: RedisClient, prefix: string) {
    this.records = new RedisRecords(redis, prefix, 'keys', INDEXES, entriesOf);
  }

  async insert(record: KeyRecord): Promise<void> {
    const outcome = await this.records.write(null, structuredClone(record));
    if (outcome !== 'written') throw new DuplicateKeyError();
  }

  async findByHash(sha256: string): Promise<KeyRecord | null> {
    const id = await this.records.holderOf(sha256);
    const record = id === null ? null : await this.records.get(id);
    // Rotated away between the two reads: the hash no longer finds it.
    return record && (record.sha256 === sha256 || record.previous?.sha256 === sha256) ? record : null;
  }

  get(id: string): Promise<KeyRecord | null> {
    return this.records.get(id);
  }

  getMany(ids: readonly string[]): Promise<KeyRecord[]> {
    return this.records.getMany([...new Set(ids)]);
  }

  /** Through the narrowest index the filter names; the other fields are checked on the records. */
  async page(filter: KeyFilter, request: PageRequest): Promise<Page<KeyRecord>> {
    const pick = (record: KeyRecord) => keyMatches(record, filter);
    if (filter.customerId !== undefined) {
      return this.records.pageOfIds(
        await this.records.idsStartingWith('customer', `${filter.customerId} `),
        pick,
        request,
      );
    }
    if (filter.prefix !== undefined) {
      return this.records.pageOfIds(await this.records.idsStartingWith('prefix', filter.prefix), pick, request);
    }
    if (filter.name !== undefined) {
      return this.records.pageOfIds(
        await this.records.idsStartingWith('name', filter.name.toLowerCase()),
        pick,
        request,
      );
    }
    return this.records.walk(pick, request);
  }

  async expiringBetween(from: Date, to: Date): Promise<KeyRecord[]> {
    const ids = await this.records.idsScored('expiry', { from: from.getTime(), to: to.getTime() });
    return (await this.records.getMany(ids)).filter((record) => record.revokedAt === undefined);
  }

  async liveKeysOf(customerId: string): Promise<KeyRecord[]> {
    // The customer index is in creation order within a customer: oldest first.
    const ids = await this.records.idsStartingWith('customer', `${customerId} `);
    return (await this.records.getMany(ids)).filter((r) => r.customerId === customerId && r.revokedAt === undefined);
  }

  async update(id: string, changes: KeyChanges, at: Date): Promise<KeyRecord | null> {
    const result = await this.records.change(id, (record) => {
      if (record.revokedAt !== undefined) return null;
      applyChanges(record, changes);
      record.updatedAt = at.toISOString();
      return record;
    });
    return result === 'taken' ? null : result;
  }

  async rotate(id: string, rotation: Rotation, at: Date): Promise<KeyRecord | null> {
    const result = await this.records.change(id, (record) => {
      if (record.revokedAt !== undefined) return null;
      if (rotation.from !== undefined && record.sha256 !== rotation.from) return null;
      record.previous = { sha256: record.sha256, expiresAt: rotation.previousExpiresAt };
      record.sha256 = rotation.sha256;
      if (rotation.prefix === undefined) delete record.prefix;
      else record.prefix = rotation.prefix;
      record.updatedAt = at.toISOString();
      return record;
    });
    if (result === 'taken') throw new DuplicateKeyError();
    return result;
  }

  async revoke(id: string, at: Date): Promise<boolean> {
    const result = await this.records.change(id, (record) => {
      if (record.revokedAt !== undefined) return null;
      record.revokedAt = at.toISOString();
      record.updatedAt = record.revokedAt;
      return record;
    });
    return result !== null && result !== 'taken';
  }

  async changedSince(since: Date): Promise<ChangedKey[]> {
    const ids = await this.records.idsScored('changed', { after: since.getTime() });
    return (await this.records.getMany(ids)).map(({ id, sha256, updatedAt }) => ({ id, sha256, updatedAt }));
  }

  ping(): Promise<void> {
    return this.records.ping();
  }
}
