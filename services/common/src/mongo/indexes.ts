import { type Db, type Document, type IndexDescription, MongoServerError } from 'mongodb';
import { redactUrl } from '../env.js';
import { StartupError } from '../serve.js';

/**
 * The indexes a service's queries need, per collection, as data: `npm run migrate` builds them
 * (createIndexes, which takes minutes on a large collection) and the service, at start, only
 * reads them back (listIndexes, one round trip per collection) and refuses to start without them.
 */
export interface CollectionIndexes {
  collection: string;
  indexes: readonly IndexDescription[];
}

/** The command that builds what a service found missing: locally, in Kubernetes and in compose. */
const migrateCommandFor = (service: string) =>
  `run \`npm run migrate\` with this MONGO_URL (Kubernetes: the migrate Job; compose: the migrate-${service} service) and start again`;

/** The options that make two indexes of one key different indexes to MongoDB (and to a query plan). */
const COMPARED_OPTIONS = ['unique', 'sparse', 'partialFilterExpression', 'expireAfterSeconds', 'collation'] as const;

/** A document's entries in order, recursively, with numbers compared as numbers (1 and 1.0 alike). */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'object' && value !== null) {
    // BSON numeric wrappers (Int32, Double, Long) read back from a server compare as their value.
    const asNumber = (value as { valueOf(): unknown }).valueOf();
    if (typeof asNumber === 'number' || typeof asNumber === 'bigint') return Number(asNumber);
    return Object.entries(value).map(([k, v]) => [k, canonical(v)]);
  }
  return value;
}

const same = (a: unknown, b: unknown) => JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));

/** What is wrong with one needed index among the listed ones of its collection, or null when it is there. */
function indexProblem(needed: IndexDescription, listed: readonly Document[]): string | null {
  const found = listed.find((index) => index.name === needed.name);
  if (!found) return 'missing';
  if (!same(found.key, needed.key)) return 'has another key';
  for (const option of COMPARED_OPTIONS) {
    // `unique: false` and no `unique` are one index; a server lists only what was set.
    const want = needed[option] === false ? undefined : needed[option];
    const have = found[option] === false ? undefined : found[option];
    if (!same(want ?? null, have ?? null)) return `has other options (${option})`;
  }
  // listIndexes shows an index still being built only with includeIndexBuilds; a listed buildUUID is one.
  if (found.buildUUID !== undefined) return 'still building';
  return null;
}

/**
 * The needed indexes that are not there as needed, as `collection.name (why)`, in the order given:
 * `listed` is each collection's listIndexes answer (an absent collection: none).
 */
export function indexesNotInPlace(
  needed: readonly CollectionIndexes[],
  listed: ReadonlyMap<string, readonly Document[]>,
): string[] {
  const problems: string[] = [];
  for (const { collection, indexes } of needed) {
    const present = listed.get(collection) ?? [];
    for (const index of indexes) {
      const problem = indexProblem(index, present);
      if (problem) problems.push(`${collection}.${index.name ?? JSON.stringify(index.key)} (${problem})`);
    }
  }
  return problems;
}

/** At most this many indexes are named on the line; the rest are counted. */
const NAMED = 4;

/**
 * The one line a service prints when its indexes are not in place: which, in which database, and
 * the command that builds them.
 */
export function indexesNotInPlaceLine(
  service: string,
  redactedUrl: string,
  db: string,
  problems: readonly string[],
): string {
  const named = problems.slice(0, NAMED).join(', ');
  const more = problems.length > NAMED ? ` and ${problems.length - NAMED} more` : '';
  return `MONGO_URL=${redactedUrl}: database "${db}" lacks the indexes ${service} needs: ${named}${more}; ${migrateCommandFor(service)}`;
}

/** Namespace not found: listIndexes on a collection that does not exist yet. */
const NAMESPACE_NOT_FOUND = 26;

/** Each collection's indexes as the server lists them; a collection that does not exist has none. */
export async function listIndexes(
  db: Db,
  collections: readonly CollectionIndexes[],
  options: { maxTimeMS?: number } = {},
): Promise<Map<string, Document[]>> {
  const listed = new Map<string, Document[]>();
  for (const { collection } of collections) {
    try {
      listed.set(collection, await db.collection(collection).listIndexes(options).toArray());
    } catch (err) {
      if (err instanceof MongoServerError && err.code === NAMESPACE_NOT_FOUND) listed.set(collection, []);
      else throw err;
    }
  }
  return listed;
}

/** IndexOptionsConflict and IndexKeySpecsConflict: an index of that key or that name exists, defined otherwise. */
const CONFLICT_CODES = new Set([85, 86]);

/**
 * An index that cannot be built because one that differs is in its way (codes 85, 86): nothing the
 * migration may decide alone, since dropping an index a running release uses slows its queries.
 */
class IndexConflictError extends Error {
  override name = 'IndexConflictError';
}

/**
 * A race with a second migration, not a problem of the specs: the collection created by the other
 * run meanwhile (NamespaceExists), or its build of the same index not yet joinable
 * (IndexBuildAlreadyInProgress). The same createIndexes then finds them.
 */
const RACE_CODES = new Set([48, 276]);

/**
 * Builds a collection's indexes: one createIndexes, which MongoDB answers at once for indexes
 * that exist with the same spec, and joins when the same build is already running elsewhere.
 */
export async function createIndexes(
  db: Db,
  { collection, indexes }: CollectionIndexes,
  existing: readonly Document[],
): Promise<void> {
  try {
    for (let attempt = 1; ; attempt++) {
      try {
        await db.collection(collection).createIndexes([...indexes]);
        return;
      } catch (err) {
        if (attempt >= 3 || !(err instanceof MongoServerError) || !RACE_CODES.has(Number(err.code))) throw err;
      }
    }
  } catch (err) {
    if (!(err instanceof MongoServerError) || !CONFLICT_CODES.has(Number(err.code))) throw err;
    const problems = indexesNotInPlace([{ collection, indexes }], new Map([[collection, existing]]));
    throw new IndexConflictError(
      `${collection}: an existing index differs from the one needed (${err.codeName ?? `code ${err.code}`}: ` +
        `${err.message.split('\n')[0]}); not in place: ${problems.join(', ') || 'see the message'}. ` +
        `Drop the index named there (db.${collection}.dropIndex("<name>")) once no running release needs it, then migrate again`,
    );
  }
}

/**
 * At start: the indexes the service needs are in place, else a StartupError of one line naming
 * them and the command that builds them. Reads only (listIndexes): nothing is built under the
 * service's request timeouts.
 */
export async function requireIndexes(
  service: string,
  db: Db,
  needed: readonly CollectionIndexes[],
  target: { url: string; db: string },
): Promise<void> {
  const problems = indexesNotInPlace(needed, await listIndexes(db, needed));
  if (problems.length > 0)
    throw new StartupError(indexesNotInPlaceLine(service, redactUrl(target.url), target.db, problems));
}
