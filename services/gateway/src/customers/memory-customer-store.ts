import { type Page, type PageRequest, pageOf } from '../paging/page.js';
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

const copy = (record: CustomerRecord): CustomerRecord => structuredClone(record);

/** Customers in this process only: `npm start` without MongoDB, and tests. */
export class MemoryCustomerStore implements CustomerStore {
  readonly kind = 'memory' as const;
  private readonly byId = new Map<string, CustomerRecord>();

  async insert(record: CustomerRecord): Promise<void> {
    if (this.byId.has(record.id)) throw new DuplicateCustomerError('id');
    if (record.externalId !== undefined && this.liveWithExternalId(record.externalId)) {
      throw new DuplicateCustomerError('externalId');
    }
    this.byId.set(record.id, copy(record));
  }

  async get(id: string): Promise<CustomerRecord | null> {
    const record = this.byId.get(id);
    return record && record.deletedAt === undefined ? copy(record) : null;
  }

  async list(filter: CustomerFilter, page: PageRequest): Promise<Page<CustomerRecord>> {
    const matching = [...this.byId.values()].filter((record) => customerMatches(record, filter));
    const result = pageOf(matching, page);
    return { items: result.items.map(copy), next: result.next };
  }

  async update(id: string, changes: CustomerChanges, at: Date): Promise<CustomerRecord | null> {
    const record = this.byId.get(id);
    if (!record || record.deletedAt !== undefined) return null;
    if (changes.externalId != null) {
      const holder = this.liveWithExternalId(changes.externalId);
      if (holder && holder.id !== id) throw new DuplicateCustomerError('externalId');
    }
    applyCustomerChanges(record, changes);
    record.updatedAt = at.toISOString();
    return copy(record);
  }

  async delete(id: string, at: Date): Promise<boolean> {
    const record = this.byId.get(id);
    if (!record || record.deletedAt !== undefined) return false;
    record.deletedAt = at.toISOString();
    record.updatedAt = record.deletedAt;
    return true;
  }

  async changedSince(since: Date): Promise<ChangedCustomer[]> {
    const changed: ChangedCustomer[] = [];
    for (const record of this.byId.values()) {
      if (record.updatedAt !== undefined && Date.parse(record.updatedAt) > since.getTime()) {
        changed.push({ id: record.id, updatedAt: record.updatedAt });
      }
    }
    return changed;
  }

  async ping(): Promise<void> {}

  private liveWithExternalId(externalId: string): CustomerRecord | undefined {
    for (const record of this.byId.values()) {
      if (record.deletedAt === undefined && record.externalId === externalId) return record;
    }
    return undefined;
  }
}
