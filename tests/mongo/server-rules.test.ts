// What the code sends MongoDB, held to what MongoDB documents as accepted. No server is needed:
// the index specs come from the stores (exported as data) and the operators from a scan of every
// source file that imports the driver, so an index or an operator a real server would refuse
// (a `$exists: false` partial filter took the whole gateway down) fails here first.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ACCESS_WRITE,
  ELECTION_MS,
  KEY_LOOKUP,
  LIST_MAX_TIME_MS,
  SERVER_SELECTION_TIMEOUT_MS,
} from '@animal-store/common/mongo/options.js';
import { loadConfig } from '@animal-store/gateway/config.js';
import { CUSTOMER_INDEXES, CUSTOMERS_COLLECTION } from '@animal-store/gateway/customers/mongo-customer-store.js';
import { GATEWAY_MONGO_OPTIONS } from '@animal-store/gateway/external-clients.js';
import { KEY_INDEXES, KEYS_COLLECTION } from '@animal-store/gateway/keys/mongo-key-store.js';
import { GATEWAY_INDEXES } from '@animal-store/gateway/migrations.js';
import { PETS_INDEXES } from '@animal-store/pets/migrations.js';
import { mongoClientOptions, PET_INDEXES, PETS_COLLECTION } from '@animal-store/pets/store/mongo-pet-store.js';
import type { Document, IndexDescription } from 'mongodb';
import { describe, expect, it } from 'vitest';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * What a partialFilterExpression may hold on every server from 4.4 to 7.0: equality, `$exists: true`,
 * `$gt`/`$gte`/`$lt`/`$lte`, `$type`, and `$and` at the top level only (6.0 adds `$or` and `$in`,
 * which 4.4/5.0 refuse). https://www.mongodb.com/docs/v6.0/core/index-partial/ and
 * https://www.mongodb.com/docs/v5.0/core/index-partial/
 */
const PARTIAL_FILTER_OPERATORS = new Set(['$eq', '$exists', '$gt', '$gte', '$lt', '$lte', '$type']);

/** https://www.mongodb.com/docs/manual/reference/operator/query/ */
const QUERY_OPERATORS = [
  '$eq',
  '$ne',
  '$gt',
  '$gte',
  '$lt',
  '$lte',
  '$in',
  '$nin',
  '$and',
  '$or',
  '$nor',
  '$not',
  '$exists',
  '$type',
  '$regex',
  '$options',
  '$expr',
  '$mod',
  '$all',
  '$elemMatch',
  '$size',
];
/** https://www.mongodb.com/docs/manual/reference/operator/update/ */
const UPDATE_OPERATORS = [
  '$currentDate',
  '$inc',
  '$min',
  '$max',
  '$mul',
  '$rename',
  '$set',
  '$setOnInsert',
  '$unset',
  '$addToSet',
  '$pop',
  '$pull',
  '$push',
  '$pullAll',
  '$each',
  '$position',
  '$slice',
  '$sort',
  '$bit',
];
/**
 * The only stages an update pipeline takes:
 * https://www.mongodb.com/docs/manual/tutorial/update-documents-with-aggregation-pipeline/
 */
const UPDATE_PIPELINE_STAGES = new Set(['$addFields', '$set', '$project', '$unset', '$replaceRoot', '$replaceWith']);
/** Expression operators: https://www.mongodb.com/docs/manual/reference/operator/aggregation/ */
const EXPRESSION_OPERATORS = [
  '$cond',
  '$ifNull',
  '$literal',
  '$min',
  '$max',
  '$eq',
  '$ne',
  '$gt',
  '$gte',
  '$lt',
  '$lte',
  '$type',
  '$and',
  '$or',
  '$not',
  '$add',
  '$subtract',
  '$concat',
  '$toLower',
  '$toUpper',
  '$mergeObjects',
];
/** System variables: https://www.mongodb.com/docs/manual/reference/aggregation-variables/ */
const SYSTEM_VARIABLES = new Set(['$$REMOVE', '$$NOW', '$$ROOT', '$$CURRENT']);
const KNOWN_OPERATORS = new Set([
  ...QUERY_OPERATORS,
  ...UPDATE_OPERATORS,
  ...UPDATE_PIPELINE_STAGES,
  ...EXPRESSION_OPERATORS,
]);

/** What `npm run migrate` builds and each service checks at start: every index the code has. */
const COLLECTIONS: ReadonlyArray<{ service: string; collection: string; indexes: readonly IndexDescription[] }> = [
  ...GATEWAY_INDEXES.map((c) => ({ service: 'gateway', ...c })),
  ...PETS_INDEXES.map((c) => ({ service: 'pets', ...c })),
];

const isPlainObject = (v: unknown): v is Document =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date) && !(v instanceof RegExp);

/** Why MongoDB would refuse this partialFilterExpression, or [] when it takes it. */
function partialFilterProblems(filter: Document, topLevel = true): string[] {
  const problems: string[] = [];
  for (const [field, value] of Object.entries(filter)) {
    if (field === '$and') {
      if (!topLevel) problems.push('$and is accepted at the top level only');
      else if (!Array.isArray(value)) problems.push('$and takes an array');
      else for (const part of value) problems.push(...partialFilterProblems(part as Document, false));
      continue;
    }
    if (field.startsWith('$')) {
      problems.push(`${field} is not accepted in a partialFilterExpression`);
      continue;
    }
    // A plain value, or a document with no operator in it, is an equality.
    if (!isPlainObject(value) || !Object.keys(value).some((k) => k.startsWith('$'))) continue;
    for (const [operator, operand] of Object.entries(value)) {
      if (!PARTIAL_FILTER_OPERATORS.has(operator)) problems.push(`${field}: ${operator} is not accepted`);
      else if (operator === '$exists' && operand !== true) problems.push(`${field}: only $exists: true is accepted`);
    }
  }
  return problems;
}

/** Why MongoDB would refuse this set of index specs on one collection, or []. */
function indexProblems(indexes: readonly IndexDescription[]): string[] {
  const problems: string[] = [];
  const names = new Set<string>();
  const patterns = new Map<string, string>();
  // https://www.mongodb.com/docs/manual/reference/limits/#indexes
  if (indexes.length + 1 > 64) problems.push('more than 64 indexes on one collection (the _id index counts)');
  for (const index of indexes) {
    const name = index.name ?? '(no name)';
    if (index.name === undefined) problems.push('an index without a name: its generated name would drift with its key');
    if (names.has(name)) problems.push(`${name}: two indexes of one name`);
    names.add(name);
    const key = Object.entries(index.key as Document);
    if (key.length === 0 || key.length > 32) problems.push(`${name}: a key of 1 to 32 fields`);
    for (const [field, direction] of key) {
      if (field === '' || field.split('.').some((part) => part === '' || part.startsWith('$'))) {
        problems.push(`${name}: key field "${field}" (no $-prefixed or empty path parts)`);
      }
      if (direction !== 1 && direction !== -1 && direction !== 'hashed' && direction !== 'text') {
        problems.push(`${name}: key direction ${String(direction)}`);
      }
      if (direction === 'hashed' && index.unique) problems.push(`${name}: a hashed index cannot be unique`);
    }
    // An index with the same key pattern and the same filter under another name is code 85.
    const pattern = JSON.stringify([key, index.partialFilterExpression ?? null, index.collation ?? null]);
    const twin = patterns.get(pattern);
    if (twin) problems.push(`${name}: same key and options as ${twin} (IndexOptionsConflict, code 85)`);
    patterns.set(pattern, name);
    // https://www.mongodb.com/docs/v6.0/core/index-partial/#restrictions
    if (index.partialFilterExpression !== undefined) {
      if (index.sparse) problems.push(`${name}: partialFilterExpression and sparse together are refused`);
      if (key.some(([field]) => field === '_id') && key.length === 1) problems.push(`${name}: _id cannot be partial`);
      for (const problem of partialFilterProblems(index.partialFilterExpression)) problems.push(`${name}: ${problem}`);
    }
    // https://www.mongodb.com/docs/manual/core/index-ttl/#restrictions
    if (index.expireAfterSeconds !== undefined && key.length !== 1) problems.push(`${name}: TTL on a compound key`);
  }
  return problems;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Every source file of the services that talks to MongoDB through the driver. */
const mongoSources = ['services/common/src', 'services/gateway/src', 'services/pets/src']
  .flatMap((dir) => sourceFiles(join(repoRoot, dir)))
  .filter((file) => /from 'mongodb'/.test(readFileSync(file, 'utf8')));

/** The code without comments, so a `$name` in prose is not taken for an operator. */
const code = (file: string) =>
  readFileSync(file, 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/(^|[^:])\/\/.*$/gm, '$1');

describe('index definitions against what MongoDB accepts', () => {
  for (const { service, collection, indexes } of COLLECTIONS) {
    it(`${service}: ${collection} has only indexes a server builds`, () => {
      expect(indexes.length).toBeGreaterThan(0);
      expect(indexProblems(indexes)).toEqual([]);
    });
  }

  it('refuses what MongoDB refuses (the table itself)', () => {
    expect(partialFilterProblems({ deletedAt: { $exists: false } })).toEqual([
      'deletedAt: only $exists: true is accepted',
    ]);
    expect(partialFilterProblems({ a: { $ne: 1 } })).toEqual(['a: $ne is not accepted']);
    expect(partialFilterProblems({ $or: [{ a: 1 }] })).toEqual(['$or is not accepted in a partialFilterExpression']);
    expect(partialFilterProblems({ $and: [{ $and: [{ a: 1 }] }] })).toEqual(['$and is accepted at the top level only']);
    expect(partialFilterProblems({ a: { $in: [1, 2] } })).toEqual(['a: $in is not accepted']);
    expect(
      partialFilterProblems({ a: 1, b: { $eq: false }, c: { $exists: true }, d: { $gte: 2, $type: 'int' } }),
    ).toEqual([]);
    expect(partialFilterProblems({ $and: [{ a: { $gt: 1 } }, { b: { x: 1 } }] })).toEqual([]);
    const sparseAndPartial = {
      key: { a: 1 },
      name: 'a',
      sparse: true,
      partialFilterExpression: { a: { $exists: true } },
    };
    expect(indexProblems([sparseAndPartial])).toEqual(['a: partialFilterExpression and sparse together are refused']);
    expect(
      indexProblems([
        { key: { a: 1 }, name: 'a' },
        { key: { a: 1 }, name: 'b' },
      ]),
    ).toEqual(['b: same key and options as a (IndexOptionsConflict, code 85)']);
    expect(indexProblems([{ key: { $a: 1 }, name: 'x' }])).toEqual([
      'x: key field "$a" (no $-prefixed or empty path parts)',
    ]);
  });
});

describe('operators in the code against what MongoDB documents', () => {
  it('finds the MongoDB sources', () => {
    const names = mongoSources.map((file) => relative(repoRoot, file));
    expect(names).toEqual(
      expect.arrayContaining([
        'services/gateway/src/keys/mongo-key-store.ts',
        'services/gateway/src/customers/mongo-customer-store.ts',
        'services/pets/src/store/mongo-pet-store.ts',
      ]),
    );
  });

  it('uses only documented operators, stages and system variables', () => {
    const unknown: string[] = [];
    for (const file of mongoSources) {
      const text = code(file);
      // Outside quotes: an operator (a key, or a shorthand property like `{ $set }`).
      const unquoted = text.replace(/'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`/g, "''");
      for (const [token] of unquoted.matchAll(/(?<![\w$])\$[A-Za-z]+\b/g)) {
        if (!KNOWN_OPERATORS.has(token)) unknown.push(`${relative(repoRoot, file)}: ${token}`);
      }
      // Inside quotes: '$field' paths are data; '$$NAME' must be a system variable.
      for (const [, variable] of text.matchAll(/'(\$\$[A-Za-z]+)'/g)) {
        if (variable && !SYSTEM_VARIABLES.has(variable)) unknown.push(`${relative(repoRoot, file)}: ${variable}`);
      }
    }
    expect(unknown).toEqual([]);
  });

  it('starts update pipelines only with the stages an update takes', () => {
    const stages: string[] = [];
    const seen = new Set<string>();
    for (const file of mongoSources) {
      // `[{ $set: … }]` / `[{ $set }]`: an array literal whose first element leads with an operator,
      // and that is no operator's argument (`$cond: [{ $eq: … }]`).
      for (const [, stage] of code(file).matchAll(/(?<!\$[A-Za-z]+\s*:\s*)\[\s*\{\s*(\$[A-Za-z]+)\s*[:}]/g)) {
        if (stage) seen.add(stage);
        if (stage && !UPDATE_PIPELINE_STAGES.has(stage)) stages.push(`${relative(repoRoot, file)}: ${stage}`);
      }
    }
    // The key store's rotation and expiry updates are pipelines: the scan must see them.
    expect(seen).toContain('$set');
    expect(stages).toEqual([]);
  });

  it('never puts $exists: false where an index has to serve it', () => {
    // A `$exists: false` can be answered only by fetching documents; the list filters the API
    // offers go through index equalities instead (revoked, deleted).
    for (const file of mongoSources) {
      const text = code(file);
      expect(text.match(/partialFilterExpression:[^\n]*\$exists: false/g) ?? [], relative(repoRoot, file)).toEqual([]);
    }
  });
});

/** The text of every call `name(…)` in `text`, its parentheses balanced. */
function callsOf(text: string, name: string): string[] {
  const calls: string[] = [];
  for (const match of text.matchAll(new RegExp(`\\.${name}\\(`, 'g'))) {
    let depth = 0;
    let end = match.index + match[0].length - 1;
    for (; end < text.length; end++) {
      if (text[end] === '(') depth++;
      else if (text[end] === ')' && --depth === 0) break;
    }
    calls.push(text.slice(match.index, end + 1));
  }
  return calls;
}

/** The body of the method or function `name` in `text`, from its name to the next member at its indent. */
function bodyOf(text: string, name: string): string {
  const start = text.search(new RegExp(`\\n(\\s*)(export )?(async )?(function )?${name}[<(]`));
  expect(start, name).toBeGreaterThanOrEqual(0);
  const indent = /\n(\s*)/.exec(text.slice(start))?.[1] ?? '';
  const end = text.indexOf(`\n${indent}}`, start + 1);
  return text.slice(start, end);
}

describe('write and read choices against what MongoDB documents', () => {
  const gatewayConfig = loadConfig({});

  it('waits for a server longer than an election, on every gateway operation', () => {
    // https://www.mongodb.com/docs/manual/core/replica-set-elections/: the median election
    // "should not typically exceed 12 seconds" with the default electionTimeoutMillis (10 s).
    expect(ELECTION_MS).toBeGreaterThanOrEqual(12_000);
    expect(SERVER_SELECTION_TIMEOUT_MS).toBeGreaterThan(ELECTION_MS);
    expect(GATEWAY_MONGO_OPTIONS.serverSelectionTimeoutMS).toBe(SERVER_SELECTION_TIMEOUT_MS);
    // The driver retries a write or read met by a step-down once, after selecting the new primary.
    expect(GATEWAY_MONGO_OPTIONS).toMatchObject({ retryWrites: true, retryReads: true });
  });

  it('answers a request on an uncached key well before server selection gives up', () => {
    expect(gatewayConfig.keyLookupTimeoutMs).toBeLessThan(SERVER_SELECTION_TIMEOUT_MS);
    // The server stops its part first, so its answer (code 50) is what the gate logs.
    expect(KEY_LOOKUP.maxTimeMS).toBeLessThan(gatewayConfig.keyLookupTimeoutMs);
  });

  it('reads key lookups with a read preference MongoDB accepts', () => {
    // https://www.mongodb.com/docs/manual/core/read-preference-staleness/: maxStalenessSeconds is
    // not compatible with mode primary, and must be at least 90 seconds.
    expect(KEY_LOOKUP.readPreference.mode).toBe('primaryPreferred');
    expect(KEY_LOOKUP.readPreference.maxStalenessSeconds).toBeGreaterThanOrEqual(90);
  });

  it('writes what decides access with w: "majority" and a wtimeout the server answers before the socket gives up', () => {
    // https://www.mongodb.com/docs/manual/reference/write-concern/: without wtimeout an
    // unreachable majority blocks the write indefinitely; after it the server answers code 64.
    expect(ACCESS_WRITE.writeConcern.w).toBe('majority');
    const wtimeout = ACCESS_WRITE.writeConcern.wtimeoutMS ?? 0;
    expect(wtimeout).toBeGreaterThan(0);
    expect(wtimeout).toBeLessThan(GATEWAY_MONGO_OPTIONS.socketTimeoutMS ?? Number.POSITIVE_INFINITY);
  });

  it("bounds list queries with a maxTimeMS the server enforces before either service's socket gives up", () => {
    // maxTimeMS is a non-negative 32-bit integer of milliseconds; code 50 past it.
    expect(Number.isInteger(LIST_MAX_TIME_MS) && LIST_MAX_TIME_MS > 0 && LIST_MAX_TIME_MS < 2 ** 31).toBe(true);
    for (const options of [GATEWAY_MONGO_OPTIONS, mongoClientOptions]) {
      expect(LIST_MAX_TIME_MS).toBeLessThan(options.socketTimeoutMS ?? Number.POSITIVE_INFINITY);
    }
    const page = code(join(repoRoot, 'services/gateway/src/paging/page.ts'));
    expect(callsOf(bodyOf(page, 'mongoPage'), 'find').join('\n')).toContain('maxTimeMS: LIST_MAX_TIME_MS');
    const pets = code(join(repoRoot, 'services/pets/src/store/mongo-pet-store.ts'));
    expect(callsOf(bodyOf(pets, 'list'), 'find').join('\n')).toContain('maxTimeMS: LIST_MAX_TIME_MS');
  });

  it.each(['services/gateway/src/keys/mongo-key-store.ts', 'services/gateway/src/customers/mongo-customer-store.ts'])(
    '%s: every write of a key or customer carries ACCESS_WRITE',
    (file) => {
      const text = code(join(repoRoot, file));
      // updateMany is the data migration of init(), which decides no access.
      const writes = [
        'insertOne',
        'updateOne',
        'findOneAndUpdate',
        'replaceOne',
        'deleteOne',
        'findOneAndDelete',
      ].flatMap((name) => callsOf(text, name));
      expect(writes.length).toBeGreaterThan(0);
      expect(writes.filter((call) => !call.includes('ACCESS_WRITE'))).toEqual([]);
    },
  );

  it('looks keys and customers up on the request path with KEY_LOOKUP', () => {
    const keys = code(join(repoRoot, 'services/gateway/src/keys/mongo-key-store.ts'));
    expect(callsOf(bodyOf(keys, 'findByHash'), 'findOne').join('\n')).toContain('...KEY_LOOKUP');
    const customers = code(join(repoRoot, 'services/gateway/src/customers/mongo-customer-store.ts'));
    expect(callsOf(bodyOf(customers, 'get'), 'findOne').join('\n')).toContain('...KEY_LOOKUP');
  });
});

describe('the migration builds every index the stores define', () => {
  it("migrates and checks at start exactly the stores' index lists", () => {
    expect(COLLECTIONS.map(({ collection, indexes }) => [collection, indexes])).toEqual([
      [KEYS_COLLECTION, KEY_INDEXES],
      [CUSTOMERS_COLLECTION, CUSTOMER_INDEXES],
      [PETS_COLLECTION, PET_INDEXES],
    ]);
  });
});

/** The page order of every key and customer list (services/gateway/src/paging/page.ts). */
const PAGE_ORDER: ReadonlyArray<[string, number]> = [
  ['createdAt', -1],
  ['id', -1],
];

/**
 * A list query as the store sends it: equality fields (the filter, and `deleted: false` for
 * customers), at most one anchored-prefix range (`$regex: '^…'`, a name or a shown prefix), sorted
 * in the page order and cut at a page.
 */
interface ListQuery {
  filter: string;
  equalities: string[];
  range?: string;
}

/**
 * Whether an index bounds the query the way https://www.mongodb.com/docs/manual/tutorial/equality-sort-range-guideline/
 * describes: its key is the equality fields (any order), then the sort (or its reverse), then the
 * range, so the scan is bounded by the equalities and stops after a page of matches without a
 * sort in memory. A partial index serves only a query that implies its filter
 * (https://www.mongodb.com/docs/manual/core/index-partial/#query-coverage): every field the filter
 * names is an equality of the query (an equality on a value implies `$exists: true`).
 */
function boundsWithoutSort(index: IndexDescription, query: ListQuery): boolean {
  const key = Object.entries(index.key as Document) as Array<[string, number]>;
  const leading = key.slice(0, query.equalities.length).map(([field]) => field);
  if ([...leading].sort().join() !== [...query.equalities].sort().join()) return false;
  const sort = key.slice(query.equalities.length, query.equalities.length + PAGE_ORDER.length);
  const forward = sort.every(([f, d], i) => f === PAGE_ORDER[i]?.[0] && d === PAGE_ORDER[i]?.[1]);
  const reverse = sort.every(([f, d], i) => f === PAGE_ORDER[i]?.[0] && d === -(PAGE_ORDER[i]?.[1] ?? 0));
  if (sort.length !== PAGE_ORDER.length || !(forward || reverse)) return false;
  if (query.range !== undefined) {
    const rest = key.slice(query.equalities.length + PAGE_ORDER.length).map(([field]) => field);
    if (!rest.includes(query.range)) return false;
  }
  return impliesPartialFilter(index, query);
}

/** A unique index on exactly the equality fields: at most one document matches, nothing to sort. */
function uniqueOnEqualities(index: IndexDescription, query: ListQuery): boolean {
  const fields = Object.keys(index.key as Document);
  return (
    index.unique === true &&
    query.range === undefined &&
    fields.every((field) => query.equalities.includes(field)) &&
    impliesPartialFilter(index, query)
  );
}

function impliesPartialFilter(index: IndexDescription, query: ListQuery): boolean {
  const filter = index.partialFilterExpression as Document | undefined;
  return Object.keys(filter ?? {}).every((field) => query.equalities.includes(field));
}

/** Every list filter the admin API offers (KeyFilter, CustomerFilter), as the stores query it. */
const LIST_QUERIES: Record<string, { indexes: readonly IndexDescription[]; queries: ListQuery[] }> = {
  keys: {
    indexes: KEY_INDEXES,
    queries: [
      { filter: 'none', equalities: [] },
      { filter: 'revoked=true|false', equalities: ['revoked'] },
      { filter: 'plan', equalities: ['plan'] },
      { filter: 'customerId', equalities: ['customerId'] },
      { filter: 'name', equalities: [], range: 'nameLower' },
      { filter: 'prefix', equalities: [], range: 'prefix' },
    ],
  },
  customers: {
    indexes: CUSTOMER_INDEXES,
    queries: [
      { filter: 'none', equalities: ['deleted'] },
      { filter: 'plan', equalities: ['deleted', 'plan'] },
      { filter: 'externalId', equalities: ['deleted', 'externalId'] },
      { filter: 'name', equalities: ['deleted'], range: 'nameLower' },
    ],
  },
};

describe('every list filter the API offers has a bounded index path', () => {
  for (const [collection, { indexes, queries }] of Object.entries(LIST_QUERIES)) {
    it.each(queries)(`${collection}: filter $filter`, (query) => {
      const paths = indexes.filter((index) => boundsWithoutSort(index, query) || uniqueOnEqualities(index, query));
      expect(
        paths.map((index) => index.name),
        `${collection} ${query.filter}`,
      ).not.toEqual([]);
    });
  }

  it('queries the fields these paths assume (the stores send equalities on them)', () => {
    const keyStore = readFileSync(join(repoRoot, 'services/gateway/src/keys/mongo-key-store.ts'), 'utf8');
    for (const field of ['plan', 'customerId', 'revoked']) expect(keyStore).toContain(`query.${field} = { $eq:`);
    expect(keyStore).toContain('query.nameLower = { $regex: startsWithPattern(');
    expect(keyStore).toContain('query.prefix = { $regex: startsWithPattern(');
    const customerStore = readFileSync(
      join(repoRoot, 'services/gateway/src/customers/mongo-customer-store.ts'),
      'utf8',
    );
    expect(customerStore).toContain('const LIVE = { deleted: { $eq: false } } as const;');
    for (const field of ['plan', 'externalId']) expect(customerStore).toContain(`query.${field} = { $eq:`);
    expect(customerStore).toContain('query.nameLower = { $regex: startsWithPattern(');
    // The cursor bounds the scan in the index too: a $lte on createdAt beside the tie-breaking $or.
    const page = readFileSync(join(repoRoot, 'services/gateway/src/paging/page.ts'), 'utf8');
    expect(page).toContain('createdAt: { $lte: at }, $or:');
  });

  it('holds what it checks (the rule itself)', () => {
    const order = { createdAt: -1, id: -1 };
    const name: ListQuery = { filter: 'name', equalities: [], range: 'nameLower' };
    // A range before the sort needs a sort in memory of every match: not a bounded page.
    expect(boundsWithoutSort({ key: { nameLower: 1, ...order } }, name)).toBe(false);
    expect(boundsWithoutSort({ key: { ...order, nameLower: 1 } }, name)).toBe(true);
    const live: ListQuery = { filter: 'plan', equalities: ['deleted', 'plan'] };
    // An index without the `deleted` equality reads deleted customers too.
    expect(boundsWithoutSort({ key: { plan: 1, ...order } }, live)).toBe(false);
    expect(boundsWithoutSort({ key: { plan: 1, deleted: 1, ...order } }, live)).toBe(true);
    expect(boundsWithoutSort({ key: { deleted: 1, plan: 1, createdAt: 1, id: 1 } }, live)).toBe(true);
    // A partial index whose filter the query does not imply is never chosen for it.
    const partial = { key: { ...order }, partialFilterExpression: { prefix: { $exists: true } } };
    expect(boundsWithoutSort(partial, { filter: 'none', equalities: [] })).toBe(false);
  });
});
