import { readFileSync } from 'node:fs';
import type { NewKey } from '../keys/create-key.js';
import { FileKeyStore } from '../keys/file-key-store.js';
import { issueKey, type KeyUpdate, type RotatedKey, rotateKey, updateKey } from '../keys/key-operations.js';
import type { KeyRecord } from '../keys/key-store.js';
import { type KeyFileEntry, toKeyFileEntry } from '../keys/keys-file.js';
import { DEFAULT_PLANS, type PlanBook } from '../plans/plans.js';
import { parsePlansFile } from '../plans/plans-file.js';
import { FLAG_NAMES } from './flags.js';
import { UsageError } from './usage.js';

/* --file: the key operations on an API_KEYS_FILE, as the admin API runs them on the key store. */

/**
 * The plans a keys file is checked against: PLANS_FILE's, as a gateway loading the file has them
 * (the spec's four without it).
 */
export function localPlans(): PlanBook {
  const file = process.env.PLANS_FILE;
  if (!file) return DEFAULT_PLANS;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new UsageError(`PLANS_FILE=${file} cannot be read`);
  }
  const parsed = parsePlansFile(text, `PLANS_FILE=${file}`, false);
  if (Array.isArray(parsed)) throw new UsageError(parsed.join('\n'));
  return parsed;
}

function noSuchKey(path: string, id: string): Error {
  return new Error(`${path} has no key with id ${id}`);
}

export function createInFile(path: string, plans: PlanBook, key: NewKey): Promise<{ key: string; record: KeyRecord }> {
  return issueKey(new FileKeyStore(path, plans), key, Date.now());
}

export async function updateInFile(
  path: string,
  plans: PlanBook,
  id: string,
  update: KeyUpdate,
): Promise<KeyFileEntry> {
  const store = new FileKeyStore(path, plans);
  const current = await store.get(id);
  const updated = current && (await updateKey(plans, store, current, update, Date.now(), FLAG_NAMES));
  if (!updated) throw noSuchKey(path, id);
  return toKeyFileEntry(updated);
}

export async function rotateInFile(
  path: string,
  plans: PlanBook,
  id: string,
  graceSeconds?: number,
): Promise<RotatedKey> {
  const store = new FileKeyStore(path, plans);
  const current = await store.get(id);
  const rotated = current && (await rotateKey(store, current, Date.now(), graceSeconds));
  if (!rotated) throw noSuchKey(path, id);
  return rotated;
}
