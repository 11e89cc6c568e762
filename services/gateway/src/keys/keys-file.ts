import { open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { type CreditTerms, creditTermsProblem, storedCreditTerms } from '../credits/credit-terms.js';
import {
  type CustomerFileEntry,
  customersFileProblems,
  toCustomerFileEntry,
  toCustomerRecord,
} from '../customers/customers-file.js';
import { keyOfCustomerProblem } from '../customers/key-ownership.js';
import { type Limits, type PlanBook, planProblem, type Scope, scopesProblem } from '../plans/plans.js';
import { parseCidrs } from './cidrs.js';
import { parseExpiry } from './expiry.js';
import type { KeyRecord, PreviousSecret } from './key-store.js';

/** One record of API_KEYS_FILE: hashes only, never a key. */
export interface KeyFileEntry {
  id: string;
  name: string;
  plan: KeyRecord['plan'];
  limits?: Limits;
  scopes?: Scope[];
  allowedCidrs?: string[];
  sha256: string;
  expiresAt?: string;
  /** The secret a rotation replaced, accepted until its expiresAt. */
  previous?: PreviousSecret;
  /** One of the file's customers, whose plan the key is on. */
  customerId?: string;
  /** A lone key's credit terms (null: none, even if its plan has some); not on a customer's key. */
  credits?: CreditTerms | null;
}

/**
 * What an API_KEYS_FILE holds: a bare array of keys (the first form, still read and written as it
 * is), or `{ "keys": [...], "customers": [...] }` once it holds customers.
 */
export interface KeysFile {
  keys: KeyFileEntry[];
  customers: CustomerFileEntry[];
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

function previousProblem(previous: unknown, at: string): string | null {
  if (typeof previous !== 'object' || previous === null || Array.isArray(previous)) {
    return `${at}: previous must be an object { sha256, expiresAt }`;
  }
  const p = previous as Record<string, unknown>;
  if (typeof p.sha256 !== 'string' || !SHA256_HEX.test(p.sha256)) {
    return `${at}: previous.sha256 must be 64 lowercase hex characters`;
  }
  return parseExpiry(p.expiresAt, `${at}: previous.expiresAt`).problem ?? null;
}

function entryProblem(plans: PlanBook, entry: unknown, index: number): string | null {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return `entry ${index} is not an object`;
  const e = entry as Record<string, unknown>;
  if (typeof e.id !== 'string' || e.id.length === 0) return `entry ${index}: id must be a non-empty string`;
  if (e.name !== undefined && typeof e.name !== 'string') return `entry ${index}: name must be a string`;
  if (typeof e.sha256 !== 'string' || !SHA256_HEX.test(e.sha256))
    return `entry ${index}: sha256 must be 64 lowercase hex characters`;
  if (e.expiresAt !== undefined) {
    const expiry = parseExpiry(e.expiresAt, `entry ${index}: expiresAt`);
    if (expiry.problem) return expiry.problem;
  }
  if (e.previous !== undefined) {
    const problem = previousProblem(e.previous, `entry ${index}`);
    if (problem) return problem;
  }
  if (e.scopes !== undefined) {
    const problem = scopesProblem(e.scopes, `entry ${index}: scopes`);
    if (problem) return problem;
  }
  if (e.allowedCidrs !== undefined) {
    const parsed = parseCidrs(e.allowedCidrs, `entry ${index}: allowedCidrs`);
    if ('problem' in parsed) return parsed.problem;
  }
  if (e.customerId !== undefined && (typeof e.customerId !== 'string' || e.customerId.length === 0)) {
    return `entry ${index}: customerId must be a non-empty string`;
  }
  if (e.credits !== undefined && e.credits !== null) {
    if (e.customerId !== undefined) {
      return `entry ${index}: credits: a key of a customer spends its customer's credits; give them to customer ${e.customerId}`;
    }
    const problem = creditTermsProblem(e.credits, `entry ${index}: credits`);
    if (problem) return problem;
  }
  const problem = planProblem(plans, e.plan, e.limits);
  return problem ? `entry ${index}: ${problem}` : null;
}

/** The keys and customers of the file's JSON, or why its shape is neither form. */
function fileParts(data: unknown): { keys: unknown[]; customers: unknown } | string {
  const shape = 'must hold a JSON array of key records, or { "keys": [...], "customers": [...] }';
  if (Array.isArray(data)) return { keys: data, customers: [] };
  if (typeof data !== 'object' || data === null) return shape;
  const { keys, customers = [], ...rest } = data as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) return `${shape}: unknown field ${JSON.stringify(unknown[0])}`;
  if (!Array.isArray(keys)) return 'keys must be an array of key records';
  return { keys, customers };
}

/** Every problem of the keys: each entry's, duplicate ids and hashes. */
function keysProblems(plans: PlanBook, keys: unknown[]): string[] {
  const problems = keys.map((entry, index) => entryProblem(plans, entry, index)).filter((p): p is string => p !== null);
  const ids = new Set<string>();
  const hashes = new Set<string>();
  for (const e of keys as Array<Partial<KeyFileEntry> | null>) {
    // Entries that are not objects were reported above; `null.id` would throw instead.
    if (typeof e !== 'object' || e === null) continue;
    if (typeof e.id === 'string') {
      if (ids.has(e.id)) problems.push(`duplicate id ${e.id}`);
      ids.add(e.id);
    }
    for (const sha256 of [e.sha256, e.previous?.sha256]) {
      if (typeof sha256 !== 'string') continue;
      if (hashes.has(sha256)) problems.push(`duplicate sha256 for id ${e.id}`);
      hashes.add(sha256);
    }
  }
  return problems;
}

/** Keys that name a customer the file does not hold, or that break its rules (keyOfCustomerProblem). */
function ownershipProblems(plans: PlanBook, file: KeysFile): string[] {
  const byId = new Map(file.customers.map((c) => [c.id, toCustomerRecord(c, new Date(0))]));
  const problems: string[] = [];
  file.keys.forEach((key, index) => {
    if (key.customerId === undefined) return;
    const customer = byId.get(key.customerId);
    const problem = customer
      ? keyOfCustomerProblem(plans, customer, key)
      : `customerId ${key.customerId} is not among the file's customers`;
    if (problem) problems.push(`entry ${index} (${key.id}): ${problem}`);
  });
  return problems;
}

/** Parses and validates the file's text: its keys and customers, or every problem, each naming its entry. */
export function keysFileContents(text: string, source: string, plans: PlanBook): KeysFile | { problems: string[] } {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return { problems: [`${source} is not valid JSON`] };
  }
  const parts = fileParts(data);
  if (typeof parts === 'string') return { problems: [`${source} ${parts}`] };
  const problems = [...keysProblems(plans, parts.keys), ...customersFileProblems(plans, parts.customers)];
  if (problems.length > 0) return { problems: problems.map((p) => `${source}: ${p}`) };
  const file: KeysFile = {
    keys: (parts.keys as KeyFileEntry[]).map((e) =>
      toKeyFileEntry(e.allowedCidrs ? { ...e, allowedCidrs: normalisedCidrs(e.allowedCidrs) } : e),
    ),
    customers: (parts.customers as CustomerFileEntry[]).map(toCustomerFileEntry),
  };
  const owners = ownershipProblems(plans, file);
  return owners.length > 0 ? { problems: owners.map((p) => `${source}: ${p}`) } : file;
}

/** As keysFileContents, throwing one error naming every problem (the keys CLI's --file). */
export function parseKeysFile(text: string, source: string, plans: PlanBook): KeysFile {
  const contents = keysFileContents(text, source, plans);
  if ('problems' in contents) {
    const [first = '', ...rest] = contents.problems;
    throw new Error([first, ...rest.map((p) => p.slice(source.length + 2))].join('; '));
  }
  return contents;
}

function normalisedCidrs(cidrs: string[]): string[] {
  const parsed = parseCidrs(cidrs, 'allowedCidrs');
  return 'cidrs' in parsed ? parsed.cidrs : cidrs;
}

/** What the file keeps of a record: only known fields, timestamps as UTC ISO text, never a secret. */
export function toKeyFileEntry(record: Omit<KeyFileEntry, 'name'> & { name?: string }): KeyFileEntry {
  const iso = (text: string) => new Date(text).toISOString();
  return {
    id: record.id,
    name: record.name ?? record.id,
    plan: record.plan,
    ...(record.limits ? { limits: { ...record.limits } } : {}),
    ...(record.scopes ? { scopes: [...record.scopes] } : {}),
    ...(record.allowedCidrs ? { allowedCidrs: [...record.allowedCidrs] } : {}),
    sha256: record.sha256,
    ...(record.expiresAt ? { expiresAt: iso(record.expiresAt) } : {}),
    ...(record.previous
      ? { previous: { sha256: record.previous.sha256, expiresAt: iso(record.previous.expiresAt) } }
      : {}),
    ...(record.customerId !== undefined ? { customerId: record.customerId } : {}),
    ...(record.credits !== undefined
      ? { credits: record.credits === null ? null : storedCreditTerms(record.credits) }
      : {}),
  };
}

export async function readKeysFile(path: string, plans: PlanBook): Promise<KeysFile> {
  return parseKeysFile(await readFile(path, 'utf8'), path, plans);
}

export function toKeyRecord(entry: KeyFileEntry, loadedAt: Date): KeyRecord {
  return { ...entry, createdAt: loadedAt.toISOString() };
}

const LOCK_WAIT_MS = 10_000;
const STALE_LOCK_MS = 30_000;

/** Holds `${path}.lock` (created exclusively) while `work` runs, so concurrent writers take turns. */
async function withFileLock<T>(path: string, work: () => Promise<T>): Promise<T> {
  const lock = `${path}.lock`;
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      const handle = await open(lock, 'wx');
      await handle.close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      // A writer that died holding the lock leaves it behind; after a while it is taken over.
      const age = await stat(lock).then(
        (s) => Date.now() - s.mtimeMs,
        () => 0,
      );
      if (age > STALE_LOCK_MS) await rm(lock, { force: true });
      else if (Date.now() > deadline)
        throw new Error(`${lock} is held by another writer; retry, or remove it if stale`);
      else await new Promise((r) => setTimeout(r, 20));
    }
  }
  try {
    return await work();
  } finally {
    await rm(lock, { force: true });
  }
}

/**
 * Rewrites the file through `change`, creating it if needed; `change` answers null to leave it as
 * it is. Writers take turns through a lock file (two CLIs writing at once would otherwise each drop
 * the other's change), each write goes to a temporary file that is renamed over the old one, so
 * readers never see half a file, and a file the gateway would refuse to load is never written. A
 * bare array stays one until the file holds customers.
 */
async function rewriteKeysFile(
  path: string,
  plans: PlanBook,
  change: (file: KeysFile) => KeysFile | null,
): Promise<void> {
  await withFileLock(path, async () => {
    let file: KeysFile = { keys: [], customers: [] };
    let bareArray = true;
    try {
      const text = await readFile(path, 'utf8');
      file = parseKeysFile(text, path, plans);
      bareArray = text.trimStart().startsWith('[');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    const next = change(file);
    if (next === null) return;
    const shape = bareArray && next.customers.length === 0 ? next.keys : next;
    const text = `${JSON.stringify(shape, null, 2)}\n`;
    // A change computed from a read made before the lock (FileKeyStore) can meet another writer's.
    parseKeysFile(text, path, plans);
    const tmp = `${path}.${process.pid}.tmp`;
    await writeFile(tmp, text, { mode: 0o600 });
    await rename(tmp, path);
  });
}

export async function appendToKeysFile(path: string, plans: PlanBook, entry: KeyFileEntry): Promise<void> {
  await rewriteKeysFile(path, plans, (file) => ({ ...file, keys: [...file.keys, entry] }));
}

/** Adds a customer; refused (the file untouched) when its id or externalId is taken in the file. */
export async function appendCustomerToKeysFile(path: string, plans: PlanBook, entry: CustomerFileEntry): Promise<void> {
  await rewriteKeysFile(path, plans, (file) => ({ ...file, customers: [...file.customers, entry] }));
}

/** Replaces one entry by id with what `change` makes of it; null, the file untouched, when it has no such id. */
export async function updateKeysFileEntry(
  path: string,
  plans: PlanBook,
  id: string,
  change: (entry: KeyFileEntry) => KeyFileEntry,
): Promise<KeyFileEntry | null> {
  let updated: KeyFileEntry | null = null;
  await rewriteKeysFile(path, plans, (file) => {
    const index = file.keys.findIndex((entry) => entry.id === id);
    if (index < 0) return null;
    updated = change(file.keys[index] as KeyFileEntry);
    return { ...file, keys: file.keys.with(index, updated) };
  });
  return updated;
}
