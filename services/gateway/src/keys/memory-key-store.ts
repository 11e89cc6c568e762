import { DuplicateKeyError, type KeyRecord, type KeyStore } from './key-store.js';

/** Key records in process memory: the embedded default, and what API_KEYS_FILE records load into. */
export class MemoryKeyStore implements KeyStore {
  readonly kind = 'memory' as const;
  private readonly byId = new Map<string, KeyRecord>();
  private readonly byHash = new Map<string, KeyRecord>();

  async insert(record: KeyRecord): Promise<void> {
    if (this.byId.has(record.id) || this.byHash.has(record.sha256)) throw new DuplicateKeyError();
    const copy = structuredClone(record);
    this.byId.set(copy.id, copy);
    this.byHash.set(copy.sha256, copy);
  }

  async findByHash(sha256: string): Promise<KeyRecord | null> {
    const record = this.byHash.get(sha256);
    return record ? structuredClone(record) : null;
  }

  async get(id: string): Promise<KeyRecord | null> {
    const record = this.byId.get(id);
    return record ? structuredClone(record) : null;
  }

  async list(): Promise<KeyRecord[]> {
    return [...this.byId.values()].map((r) => structuredClone(r));
  }

  async revoke(id: string, at: Date): Promise<boolean> {
    const record = this.byId.get(id);
    if (!record || record.revokedAt) return false;
    record.revokedAt = at.toISOString();
    return true;
  }

  async revokedSince(since: Date): Promise<Array<Pick<KeyRecord, 'id' | 'sha256' | 'revokedAt'>>> {
    const after = since.toISOString();
    return [...this.byId.values()]
      .filter((r) => r.revokedAt !== undefined && r.revokedAt > after)
      .map(({ id, sha256, revokedAt }) => ({ id, sha256, revokedAt }));
  }

  async ping(): Promise<void> {}
}
