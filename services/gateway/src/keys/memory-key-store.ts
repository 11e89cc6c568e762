import { type Page, type PageRequest, pageOf } from '../paging/page.js';
import type { ChangedKey, KeyChanges, KeyFilter, KeyRecord, KeyStore, Rotation } from './key-store.js';
import { applyChanges, DuplicateKeyError, keyMatches } from './key-store.js';

/** Key records in process memory: the embedded default, and what API_KEYS_FILE records load into. */
export class MemoryKeyStore implements KeyStore {
  readonly kind = 'memory' as const;
  private readonly byId = new Map<string, KeyRecord>();
  private readonly byHash = new Map<string, KeyRecord>();

  async insert(record: KeyRecord): Promise<void> {
    if (this.byId.has(record.id) || this.byHash.has(record.sha256)) throw new DuplicateKeyError();
    if (record.previous && this.byHash.has(record.previous.sha256)) throw new DuplicateKeyError();
    const copy = structuredClone(record);
    this.byId.set(copy.id, copy);
    this.byHash.set(copy.sha256, copy);
    if (copy.previous) this.byHash.set(copy.previous.sha256, copy);
  }

  async findByHash(sha256: string): Promise<KeyRecord | null> {
    const record = this.byHash.get(sha256);
    return record ? structuredClone(record) : null;
  }

  async get(id: string): Promise<KeyRecord | null> {
    const record = this.byId.get(id);
    return record ? structuredClone(record) : null;
  }

  async getMany(ids: readonly string[]): Promise<KeyRecord[]> {
    return [...new Set(ids)].flatMap((id) => {
      const record = this.byId.get(id);
      return record ? [structuredClone(record)] : [];
    });
  }

  async expiringBetween(from: Date, to: Date): Promise<KeyRecord[]> {
    return [...this.byId.values()]
      .filter((r) => {
        if (r.revokedAt !== undefined || r.expiresAt === undefined) return false;
        const at = Date.parse(r.expiresAt);
        return at >= from.getTime() && at <= to.getTime();
      })
      .map((r) => structuredClone(r));
  }

  async page(filter: KeyFilter, request: PageRequest): Promise<Page<KeyRecord>> {
    const result = pageOf(
      [...this.byId.values()].filter((r) => keyMatches(r, filter)),
      request,
    );
    return { items: result.items.map((r) => structuredClone(r)), next: result.next };
  }

  async liveKeysOf(customerId: string): Promise<KeyRecord[]> {
    return [...this.byId.values()]
      .filter((r) => r.customerId === customerId && !r.revokedAt)
      .sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt))
      .map((r) => structuredClone(r));
  }

  private live(id: string): KeyRecord | null {
    const record = this.byId.get(id);
    return record && !record.revokedAt ? record : null;
  }

  async update(id: string, changes: KeyChanges, at: Date): Promise<KeyRecord | null> {
    const record = this.live(id);
    if (!record) return null;
    applyChanges(record, changes);
    record.updatedAt = at.toISOString();
    return structuredClone(record);
  }

  async rotate(id: string, rotation: Rotation, at: Date): Promise<KeyRecord | null> {
    const record = this.live(id);
    if (!record || (rotation.from !== undefined && record.sha256 !== rotation.from)) return null;
    if (this.byHash.has(rotation.sha256)) throw new DuplicateKeyError();
    if (record.previous) this.byHash.delete(record.previous.sha256);
    record.previous = { sha256: record.sha256, expiresAt: rotation.previousExpiresAt };
    record.sha256 = rotation.sha256;
    if (rotation.prefix === undefined) delete record.prefix;
    else record.prefix = rotation.prefix;
    record.updatedAt = at.toISOString();
    this.byHash.set(rotation.sha256, record);
    return structuredClone(record);
  }

  async revoke(id: string, at: Date): Promise<boolean> {
    const record = this.live(id);
    if (!record) return false;
    record.revokedAt = at.toISOString();
    record.updatedAt = record.revokedAt;
    return true;
  }

  async changedSince(since: Date): Promise<ChangedKey[]> {
    const after = since.toISOString();
    return [...this.byId.values()]
      .filter((r) => r.updatedAt !== undefined && r.updatedAt > after)
      .map(({ id, sha256, updatedAt }) => ({ id, sha256, updatedAt }));
  }

  async ping(): Promise<void> {}
}
