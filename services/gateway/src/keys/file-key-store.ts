import type { PlanBook } from '../plans/plans.js';
import { applyChanges, type KeyChanges, type KeyRecord, type KeyStore, type Rotation } from './key-store.js';
import {
  appendToKeysFile,
  type KeyFileEntry,
  readKeysFile,
  toKeyFileEntry,
  toKeyRecord,
  updateKeysFileEntry,
} from './keys-file.js';

/**
 * An API_KEYS_FILE as the key operations (key-operations.ts) write it, for the keys CLI's --file:
 * each change is made under the file's lock and the file rewritten whole (keys-file.ts). The file
 * holds only what a gateway loads from it, so a record read back has no prefix, no update or
 * revocation time, and the moment it was read or written as its createdAt (as a gateway stamps
 * its load time). Gateways see a change when they next start. Not a KeyStore: a file cannot keep
 * a revoked record for replicas to learn of, nor say what changed since when.
 */
export class FileKeyStore implements Pick<KeyStore, 'get' | 'insert' | 'update' | 'rotate'> {
  constructor(
    readonly path: string,
    /** The plans in force, which every entry's plan and limits must fit. */
    private readonly plans: PlanBook,
  ) {}

  async get(id: string): Promise<KeyRecord | null> {
    let entries: KeyFileEntry[];
    try {
      entries = (await readKeysFile(this.path, this.plans)).keys;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
    const entry = entries.find((e) => e.id === id);
    return entry ? toKeyRecord(entry, new Date()) : null;
  }

  async insert(record: KeyRecord): Promise<void> {
    await appendToKeysFile(this.path, this.plans, toKeyFileEntry(record));
  }

  async update(id: string, changes: KeyChanges, at: Date): Promise<KeyRecord | null> {
    const entry = await updateKeysFileEntry(this.path, this.plans, id, (current) => {
      const next = structuredClone(current);
      applyChanges(next, changes);
      return toKeyFileEntry(next);
    });
    return entry && toKeyRecord(entry, at);
  }

  /** The file keeps no prefix: a rotation's is dropped. */
  async rotate(id: string, rotation: Rotation, at: Date): Promise<KeyRecord | null> {
    let stale = false;
    const entry = await updateKeysFileEntry(this.path, this.plans, id, (current) => {
      stale = rotation.from !== undefined && current.sha256 !== rotation.from;
      if (stale) return current;
      return {
        ...current,
        sha256: rotation.sha256,
        previous: { sha256: current.sha256, expiresAt: rotation.previousExpiresAt },
      };
    });
    return entry && !stale ? toKeyRecord(entry, at) : null;
  }
}
