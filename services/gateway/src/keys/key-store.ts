import type { Limits, Plan } from '../plans.js';

export interface KeyRecord {
  id: string;
  name: string;
  plan: Plan;
  /** Present only for enterprise keys. */
  limits?: Limits;
  /** Hex SHA-256 of the key; the key itself is never stored. */
  sha256: string;
  /** First characters of the key, for people to recognise it (absent for keys from API_KEYS_FILE). */
  prefix?: string;
  createdAt: string;
  revokedAt?: string;
}

/** Where key records live. Revocation keeps the record (with revokedAt) so replicas can learn of it. */
export interface KeyStore {
  readonly kind: 'memory' | 'mongo';
  insert(record: KeyRecord): Promise<void>;
  findByHash(sha256: string): Promise<KeyRecord | null>;
  get(id: string): Promise<KeyRecord | null>;
  list(): Promise<KeyRecord[]>;
  /** Marks the key revoked; false when there is no such live key. */
  revoke(id: string, at: Date): Promise<boolean>;
  /** Ids and hashes of keys revoked after `since`, for replicas to evict from their caches. */
  revokedSince(since: Date): Promise<Array<Pick<KeyRecord, 'id' | 'sha256' | 'revokedAt'>>>;
  ping(): Promise<void>;
}

export class DuplicateKeyError extends Error {
  constructor() {
    super('a key with this id or hash already exists');
  }
}
