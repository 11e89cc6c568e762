import type { Page, PageRequest } from '../paging/page.js';
import type { RedisClient } from '../redis/clients.js';
import { createdMember, type RecordEntries, RedisRecords } from '../redis/redis-records.js';
import {
  applyCustomerChanges,
  type ChangedCustomer,
  type CustomerChanges,
  type CustomerFilter,
  type CustomerRecord,
  type CustomerStore,
  customerMatches,
  DuplicateCustomerError,
} from './customer-store.js';

/** The sorted sets of `<prefix>{customers}:`: list order and name search (live customers), changes. */
const INDEXES = ['created', 'name', 'changed'] as const;

/** A live customer is listed and holds its externalId; a deleted one is only reported as changed. */
function entriesOf(record: CustomerRecord): RecordEntries {
  const sorted: RecordEntries['sorted'] = [];
  if (record.updatedAt !== undefined) sorted.push(['changed', record.id, Date.parse(record.updatedAt)]);
  if (record.deletedAt !== undefined) return { unique: [], sorted };
  sorted.push(['created', createdMember(record)], ['name', `${record.name.toLowerCase()} ${record.id}`]);
  return { unique: record.externalId === undefined ? [] : [record.externalId], sorted };
}

/**
 * Customers in Redis (`<prefix>{customers}:…`, one Cluster slot), beside their credit ledgers and
 * usage history, for a gateway with Redis and no MongoDB. externalId is unique among live
 * customers in the same script that writes the record.
 */
export class RedisCustomerStore implements CustomerStore {
  readonly kind = 'redis' as const;
  private readonly records: RedisRecords<CustomerRecord>;

  constructor(redis: RedisClient, prefix: string) {
    this.records = new RedisRecords(redis, prefix, 'customers', INDEXES, entriesOf);
  }

  async insert(record: CustomerRecord): Promise<void> {
    const outcome = await this.records.write(null, structuredClone(record));
    if (outcome === 'exists') throw new DuplicateCustomerError('id');
    if (outcome !== 'written') throw new DuplicateCustomerError('externalId');
  }

  async get(id: string): Promise<CustomerRecord | null> {
    const record = await this.records.get(id);
    return record && record.deletedAt === undefined ? record : null;
  }

  async list(filter: CustomerFilter, page: PageRequest): Promise<Page<CustomerRecord>> {
    const pick = (record: CustomerRecord) => customerMatches(record, filter);
    if (filter.externalId !== undefined) {
      const holder = await this.records.holderOf(filter.externalId);
      return this.records.pageOfIds(holder === null ? [] : [holder], pick, page);
    }
    if (filter.name !== undefined) {
      return this.records.pageOfIds(await this.records.idsStartingWith('name', filter.name.toLowerCase()), pick, page);
    }
    return this.records.walk(pick, page);
  }

  async update(id: string, changes: CustomerChanges, at: Date): Promise<CustomerRecord | null> {
    const result = await this.records.change(id, (record) => {
      if (record.deletedAt !== undefined) return null;
      applyCustomerChanges(record, changes);
      record.updatedAt = at.toISOString();
      return record;
    });
    if (result === 'taken') throw new DuplicateCustomerError('externalId');
    return result;
  }

  async delete(id: string, at: Date): Promise<boolean> {
    const result = await this.records.change(id, (record) => {
      if (record.deletedAt !== undefined) return null;
      record.deletedAt = at.toISOString();
      record.updatedAt = record.deletedAt;
      return record;
    });
    return result !== null && result !== 'taken';
  }

  async changedSince(since: Date): Promise<ChangedCustomer[]> {
    const ids = await this.records.idsScored('changed', { after: since.getTime() });
    return (await this.records.getMany(ids)).map(({ id, updatedAt }) => ({ id, ...(updatedAt ? { updatedAt } : {}) }));
  }

  ping(): Promise<void> {
    return this.records.ping();
  }
}
