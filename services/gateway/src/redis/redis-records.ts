import type { Redis, Result } from 'ioredis';
import { decodeCursor, encodeCursor, type Page, type PageRequest, pageOf } from '../paging/page.js';
import type { RedisClient } from './clients.js';
import { FENCE_LUA, FencedWrites } from './fenced-writes.js';

/*
 * A collection of JSON records in Redis (the key and customer stores when keys live in Redis, not
 * MongoDB): every record in one hash, values that must be unique (a key's hashes, a customer's
 * externalId) in another, and sorted-set indexes. Every Redis key of a collection carries its
 * hash tag (`{keys}`, `{customers}`), so the one write script reaches all of them on a Cluster.
 */

/** Where a record appears: unique values it holds, and members of the collection's sorted sets. */
export interface RecordEntries {
  unique: string[];
  /** [index, member, score]: lex indexes score 0, time indexes score by milliseconds. */
  sorted: Array<[index: string, member: string, score?: number]>;
}

/**
 * Writes a record and its entries in one step, only while the record is still what the caller
 * read (compare-and-set on its JSON: a concurrent change makes the caller read again), and only
 * while no other record holds one of its unique values.
 * Fenced (fenced-writes.ts): a key created, a customer made or a key revoked that was answered
 * 503 in a stall never lands later, where a retry would meet a duplicate or a revived change.
 * KEYS: records hash, unique hash, then the sorted sets. ARGV: id, the JSON read ('' for an
 * insert), the new JSON, the old and new entries (JSON, sorted sets by their position in KEYS),
 * the fence's deadline. Returns 1 written, 0 the id exists (insert), -1 changed meanwhile, -2 a
 * unique value is taken; the FENCED error once past the deadline.
 */
const WRITE_SCRIPT = `${FENCE_LUA}
local late = fenceRefusal(ARGV[6])
if late then return late end
local id, expected, record = ARGV[1], ARGV[2], ARGV[3]
local current = redis.call('HGET', KEYS[1], id)
if expected == '' then
  if current then return 0 end
elseif current ~= expected then
  return -1
end
local old, new = cjson.decode(ARGV[4]), cjson.decode(ARGV[5])
for _, value in ipairs(new.u) do
  local holder = redis.call('HGET', KEYS[2], value)
  if holder and holder ~= id then return -2 end
end
for _, value in ipairs(old.u) do
  if redis.call('HGET', KEYS[2], value) == id then redis.call('HDEL', KEYS[2], value) end
end
for _, value in ipairs(new.u) do redis.call('HSET', KEYS[2], value, id) end
for _, entry in ipairs(old.z) do redis.call('ZREM', KEYS[entry[1]], entry[2]) end
for _, entry in ipairs(new.z) do redis.call('ZADD', KEYS[entry[1]], entry[3], entry[2]) end
redis.call('HSET', KEYS[1], id, record)
return 1
`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    gatewayRecordWrite(numKeys: number, ...keysAndArgs: string[]): Result<number, Context>;
  }
}

type WriteOutcome = 'written' | 'exists' | 'changed' | 'taken';
const OUTCOMES: Record<number, WriteOutcome> = { 1: 'written', 0: 'exists', [-1]: 'changed', [-2]: 'taken' };

/** How many a walk of the creation index reads at a time, and how many ids one HMGET asks for. */
const BATCH = 200;
/** How often a read-change-write is tried again when another write came between (then it fails). */
const ATTEMPTS = 20;

/** Newest first, ties by id, as every list pages (paging/page.ts): `<ISO time> <id>`, compared as bytes. */
export function createdMember(record: { createdAt: string; id: string }): string {
  return `${new Date(record.createdAt).toISOString()} ${record.id}`;
}

/** The id at the end of an index member (`… <id>`; ids have no spaces). */
const idOf = (member: string): string => member.slice(member.lastIndexOf(' ') + 1);

export class RedisRecords<R extends { id: string; createdAt: string }> {
  private readonly recordsKey: string;
  private readonly uniqueKey: string;
  private readonly sortedKeys: string[];
  private readonly fences: FencedWrites;

  /**
   * `indexes` names the collection's sorted sets, one of them `created`; `entriesOf` says where a
   * record appears (the one place each store's indexing rule is written).
   */
  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    collection: string,
    private readonly indexes: readonly string[],
    private readonly entriesOf: (record: R) => RecordEntries,
  ) {
    const base = `${prefix}{${collection}}`;
    this.recordsKey = `${base}:records`;
    this.uniqueKey = `${base}:unique`;
    this.sortedKeys = indexes.map((name) => `${base}:${name}`);
    this.fences = new FencedWrites(redis);
    // One definition for every collection on a client: the number of keys is the call's first argument.
    if (typeof (redis as Partial<Redis>).gatewayRecordWrite !== 'function') {
      redis.defineCommand('gatewayRecordWrite', { lua: WRITE_SCRIPT });
    }
  }

  private key(index: string): string {
    const at = this.indexes.indexOf(index);
    if (at < 0) throw new Error(`no index ${index}`);
    return this.sortedKeys[at] as string;
  }

  /** The record and the JSON it was read from (what a change compares against). */
  async read(id: string): Promise<{ record: R; json: string } | null> {
    const json = await this.redis.hget(this.recordsKey, id);
    return json === null ? null : { record: JSON.parse(json) as R, json };
  }

  async get(id: string): Promise<R | null> {
    return (await this.read(id))?.record ?? null;
  }

  /** The records of these ids, in their order, unknown ones left out. */
  async getMany(ids: readonly string[]): Promise<R[]> {
    const out: R[] = [];
    for (let i = 0; i < ids.length; i += BATCH) {
      const texts = await this.redis.hmget(this.recordsKey, ...ids.slice(i, i + BATCH));
      for (const text of texts) if (text !== null) out.push(JSON.parse(text) as R);
    }
    return out;
  }

  /** The id holding a unique value, or null. */
  holderOf(value: string): Promise<string | null> {
    return this.redis.hget(this.uniqueKey, value);
  }

  /** Writes `next` over `previous` (null: a new record), with its entries, as WRITE_SCRIPT says. */
  async write(previous: { record: R; json: string } | null, next: R): Promise<WriteOutcome> {
    const encode = (entries: RecordEntries) =>
      JSON.stringify({
        u: entries.unique,
        // Redis's cjson decodes an empty array as an empty table, which ipairs walks as none.
        z: entries.sorted.map(([index, member, score]) => [
          this.indexes.indexOf(index) + 3,
          member,
          String(score ?? 0),
        ]),
      });
    const none: RecordEntries = { unique: [], sorted: [] };
    const reply = await this.fences.run(this.recordsKey, (deadline) =>
      this.redis.gatewayRecordWrite(
        2 + this.sortedKeys.length,
        this.recordsKey,
        this.uniqueKey,
        ...this.sortedKeys,
        next.id,
        previous?.json ?? '',
        JSON.stringify(next),
        encode(previous ? this.entriesOf(previous.record) : none),
        encode(this.entriesOf(next)),
        String(deadline),
      ),
    );
    const outcome = OUTCOMES[reply];
    if (outcome === undefined) throw new Error(`record write script answered ${reply}`);
    return outcome;
  }

  /**
   * Reads a record, changes it and writes it back, again while another write came between.
   * `change` returns the new record, or null to leave it as it is; null then, or when there is no
   * record. A unique value the new record holds that another holds is 'taken'.
   */
  async change(id: string, change: (record: R) => R | null): Promise<R | 'taken' | null> {
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const previous = await this.read(id);
      const next = previous ? change(structuredClone(previous.record)) : null;
      if (!previous || !next) return null;
      const result = await this.write(previous, next);
      if (result === 'written') return next;
      if (result === 'taken') return 'taken';
    }
    throw new Error(`record ${id} kept changing under ${ATTEMPTS} attempts to write it`);
  }

  /** The ids whose lex-index members start with `text` (`<text>… <id>`), in index order. */
  async idsStartingWith(index: string, text: string): Promise<string[]> {
    // Up to the byte 0xff, which never occurs in UTF-8: every member that starts with the text.
    const to = Buffer.concat([Buffer.from(`[${text}`), Buffer.from([0xff])]);
    const members = await (this.redis as Redis).zrangeBuffer(this.key(index), `[${text}`, to, 'BYLEX');
    return members.map((member) => idOf(member.toString()));
  }

  /** The ids in a time index scored after `after` (exclusive) or from `from` (inclusive), up to `to`. */
  async idsScored(index: string, range: { after?: number; from?: number; to?: number }): Promise<string[]> {
    const min = range.after !== undefined ? `(${range.after}` : String(range.from ?? '-inf');
    return this.redis.zrangebyscore(this.key(index), min, range.to === undefined ? '+inf' : String(range.to));
  }

  /** One page of candidates the caller gathered through an index (a few: a customer's, a name's). */
  async pageOfIds(ids: readonly string[], pick: (record: R) => boolean, request: PageRequest): Promise<Page<R>> {
    return pageOf((await this.getMany([...new Set(ids)])).filter(pick), request);
  }

  /**
   * One page in list order, walking the creation index from the cursor a batch at a time and
   * keeping the records `pick` takes, until one more than the page holds tells a next page exists.
   */
  async walk(pick: (record: R) => boolean, request: PageRequest): Promise<Page<R>> {
    let from = request.after === undefined ? '+' : `(${createdMember(decodeCursor(request.after))}`;
    const items: R[] = [];
    for (;;) {
      const members = await this.redis.zrange(this.key('created'), from, '-', 'BYLEX', 'REV', 'LIMIT', 0, BATCH);
      for (const record of await this.getMany(members.map(idOf))) {
        if (pick(record)) items.push(record);
      }
      if (items.length > request.limit || members.length < BATCH) break;
      from = `(${members.at(-1)}`;
    }
    const page = items.slice(0, request.limit);
    const last = page.at(-1);
    return { items: page, next: items.length > request.limit && last ? encodeCursor(last) : null };
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }
}
