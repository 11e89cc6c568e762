import type { NewKey } from '../keys/create-key.js';
import { FileKeyStore } from '../keys/file-key-store.js';
import { issueKey, type KeyUpdate, type RotatedKey, rotateKey, updateKey } from '../keys/key-operations.js';
import type { KeyRecord } from '../keys/key-store.js';
import { type KeyFileEntry, toKeyFileEntry } from '../keys/keys-file.js';
import { FLAG_NAMES } from './flags.js';

/* --file: the key operations on an API_KEYS_FILE, as the admin API runs them on the key store. */

function noSuchKey(path: string, id: string): Error {
  return new Error(`${path} has no key with id ${id}`);
}

export function createInFile(path: string, key: NewKey): Promise<{ key: string; record: KeyRecord }> {
  return issueKey(new FileKeyStore(path), key, Date.now());
}

export async function updateInFile(path: string, id: string, update: KeyUpdate): Promise<KeyFileEntry> {
  const store = new FileKeyStore(path);
  const current = await store.get(id);
  const updated = current && (await updateKey(store, current, update, Date.now(), FLAG_NAMES));
  if (!updated) throw noSuchKey(path, id);
  return toKeyFileEntry(updated);
}

export async function rotateInFile(path: string, id: string, graceSeconds?: number): Promise<RotatedKey> {
  const store = new FileKeyStore(path);
  const current = await store.get(id);
  const rotated = current && (await rotateKey(store, current, Date.now(), graceSeconds));
  if (!rotated) throw noSuchKey(path, id);
  return rotated;
}
