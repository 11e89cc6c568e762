import { mergedPage, type Page, type PageRequest, pageOf } from '../paging/page.js';
import {
  type ChangedCustomer,
  type CustomerChanges,
  type CustomerFilter,
  type CustomerRecord,
  type CustomerStore,
  customerMatches,
  DuplicateCustomerError,
} from './customer-store.js';

/** A change asked of a customer that API_KEYS_FILE declares: the admin API answers 409. */
export class FileCustomerError extends Error {
  constructor(id: string) {
    super(
      `Customer ${id} is managed in a file (API_KEYS_FILE): change it there (npm run keys -- … --file PATH) and roll the gateway`,
    );
  }
}

/**
 * API_KEYS_FILE's customers, read-only, in front of the configured customer store, as the file's
 * keys sit in front of the key store: `get` finds them first, lists show them beside the store's,
 * and a change to one is refused (the file, not the admin API, says what they are).
 */
export class FileCustomers implements CustomerStore {
  readonly kind: CustomerStore['kind'];
  private readonly byId: ReadonlyMap<string, CustomerRecord>;

  constructor(
    private readonly store: CustomerStore,
    fromFile: readonly CustomerRecord[],
  ) {
    this.kind = store.kind;
    this.byId = new Map(fromFile.map((record) => [record.id, record]));
  }

  /** Whether the file declares this customer. */
  declares(id: string): boolean {
    return this.byId.has(id);
  }

  async insert(record: CustomerRecord): Promise<void> {
    if (this.byId.has(record.id)) throw new DuplicateCustomerError('id');
    const externalId = record.externalId;
    if (externalId !== undefined && [...this.byId.values()].some((c) => c.externalId === externalId)) {
      throw new DuplicateCustomerError('externalId');
    }
    await this.store.insert(record);
  }

  async get(id: string): Promise<CustomerRecord | null> {
    const fromFile = this.byId.get(id);
    return fromFile ? structuredClone(fromFile) : this.store.get(id);
  }

  /** The file's and the store's, merged in list order (mergedPage); the cursor is checked first. */
  async list(filter: CustomerFilter, request: PageRequest): Promise<Page<CustomerRecord>> {
    const fromFile = pageOf(
      [...this.byId.values()].filter((record) => customerMatches(record, filter)),
      request,
    );
    const fromStore = await this.store.list(filter, request);
    const copies = { items: fromFile.items.map((r) => structuredClone(r)), next: fromFile.next };
    return mergedPage([copies, fromStore], request.limit, (record) => record);
  }

  async update(id: string, changes: CustomerChanges, at: Date): Promise<CustomerRecord | null> {
    if (this.byId.has(id)) throw new FileCustomerError(id);
    return this.store.update(id, changes, at);
  }

  async delete(id: string, at: Date): Promise<boolean> {
    if (this.byId.has(id)) throw new FileCustomerError(id);
    return this.store.delete(id, at);
  }

  /** The file's customers never change while the gateway runs. */
  changedSince(since: Date): Promise<ChangedCustomer[]> {
    return this.store.changedSince(since);
  }

  ping(): Promise<void> {
    return this.store.ping();
  }
}
