import { readFileSync } from 'node:fs';
import { type CustomerRequest, checkNewCustomer } from '../customers/customer-operations.js';
import type { CustomerRecord, CustomerStore } from '../customers/customer-store.js';
import { toCustomerFileEntry, toCustomerRecord } from '../customers/customers-file.js';
import { keyOwnership } from '../customers/key-ownership.js';
import { createKey } from '../keys/create-key.js';
import { FileKeyStore } from '../keys/file-key-store.js';
import {
  checkNewKey,
  type KeyRequest,
  KeyRuleError,
  type KeyUpdate,
  type RotatedKey,
  rotateKey,
  updateKey,
} from '../keys/key-operations.js';
import type { KeyRecord } from '../keys/key-store.js';
import { appendCustomerToKeysFile, type KeyFileEntry, readKeysFile, toKeyFileEntry } from '../keys/keys-file.js';
import { DEFAULT_PLANS, type Plan, type PlanBook } from '../plans/plans.js';
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

/** The file's customers, as the key ownership rule asks for them (none when there is no file yet). */
function fileCustomers(path: string, plans: PlanBook): Pick<CustomerStore, 'get'> {
  return {
    async get(id) {
      try {
        const entry = (await readKeysFile(path, plans)).customers.find((c) => c.id === id);
        return entry ? toCustomerRecord(entry, new Date()) : null;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw err;
      }
    },
  };
}

/** A new key in the file: of one of its customers (on its plan) or of the plan asked for, as the admin API makes it. */
export async function createInFile(
  path: string,
  plans: PlanBook,
  request: Omit<KeyRequest, 'plan'> & { plan?: string; customerId?: string },
): Promise<{ key: string; record: KeyRecord }> {
  const now = Date.now();
  const { plan, customerId } = await keyOwnership(plans, fileCustomers(path, plans), null, request);
  if (plan === undefined) throw new KeyRuleError('create needs --plan (or --customer)');
  const made = createKey(checkNewKey(plans, { ...request, plan }, now, FLAG_NAMES), new Date(now));
  if (customerId !== undefined) made.record.customerId = customerId;
  await new FileKeyStore(path, plans).insert(made.record);
  return made;
}

/** A new customer in the file, checked as the admin API checks one; its id is made here. */
export async function createCustomerInFile(
  path: string,
  plans: PlanBook,
  request: CustomerRequest,
): Promise<CustomerRecord> {
  const record = checkNewCustomer(plans, request, Date.now(), FLAG_NAMES.limits);
  await appendCustomerToKeysFile(path, plans, toCustomerFileEntry(record));
  return record;
}

export async function updateInFile(
  path: string,
  plans: PlanBook,
  id: string,
  update: KeyUpdate,
): Promise<KeyFileEntry> {
  const store = new FileKeyStore(path, plans);
  const current = await store.get(id);
  if (!current) throw noSuchKey(path, id);
  // A key of one of the file's customers stays on its plan, as through the admin API.
  const { plan } = await keyOwnership(plans, fileCustomers(path, plans), current, update);
  const placed = plan !== undefined && plan !== current.plan ? { ...update, plan: plan as Plan } : update;
  const updated = await updateKey(plans, store, current, placed, Date.now(), FLAG_NAMES);
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
