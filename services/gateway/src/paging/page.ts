import { LIST_MAX_TIME_MS } from '@animal-store/common/mongo/options.js';
import type { Collection, Document, Filter } from 'mongodb';

/**
 * Lists of keys and customers come a page at a time, newest first, behind an opaque cursor: the
 * last item's creation time and id, so a page is a range read on an index (`createdAt, id`) in
 * MongoDB, however far in the list it is, and records created meanwhile never shift a later page.
 */

export interface Page<T> {
  items: T[];
  /** Pass as `after` for the next page; null on the last page. */
  next: string | null;
}

export interface PageRequest {
  /** 1–MAX_PAGE_SIZE */
  limit: number;
  /** A `next` from the page before; absent for the first page. */
  after?: string;
}

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 500;

/** Where a page resumes: the last item it showed. */
export interface Position {
  createdAt: string;
  id: string;
}

/** A cursor that was not made by this API (or was cut): answered 400 `invalid_cursor`. */
export class BadCursorError extends Error {
  constructor() {
    super('cursor is not one this API gave out; start again without `after`');
  }
}

export function encodeCursor(position: Position): string {
  return Buffer.from(JSON.stringify([position.createdAt, position.id])).toString('base64url');
}

export function decodeCursor(cursor: string): Position {
  if (cursor.length > 200 || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw new BadCursorError();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw new BadCursorError();
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== 2 ||
    typeof parsed[0] !== 'string' ||
    typeof parsed[1] !== 'string' ||
    Number.isNaN(Date.parse(parsed[0]))
  ) {
    throw new BadCursorError();
  }
  return { createdAt: new Date(parsed[0]).toISOString(), id: parsed[1] };
}

/** Newest first; equal creation times by id, descending, so the order is total. */
function compareByCreation(a: Position, b: Position): number {
  const byTime = Date.parse(b.createdAt) - Date.parse(a.createdAt);
  if (byTime !== 0) return byTime;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

/** True when `item` comes after the cursor's position in list order. */
function isAfter(item: Position, position: Position): boolean {
  return compareByCreation(position, item) < 0;
}

/**
 * One page of an in-memory list (memory and file stores): sorted, resumed after the cursor, cut
 * at the limit; `next` only when more items follow.
 */
export function pageOf<T extends Position>(all: Iterable<T>, request: PageRequest): Page<T> {
  const position = request.after === undefined ? undefined : decodeCursor(request.after);
  const sorted = [...all].sort(compareByCreation);
  const rest = position ? sorted.filter((item) => isAfter(item, position)) : sorted;
  const items = rest.slice(0, request.limit);
  const last = items.at(-1);
  return { items, next: rest.length > request.limit && last ? encodeCursor(last) : null };
}

/**
 * One page from pages of two sources cut after the same cursor at the same size (API_KEYS_FILE's
 * records and a store's): the first `limit` of them together in list order, whichever source they
 * come from, and the cursor of the last one, which resumes both.
 */
export function mergedPage<T>(
  pages: ReadonlyArray<Page<T>>,
  limit: number,
  positionOf: (item: T) => Position,
): Page<T> {
  const merged = pages.flatMap((page) => page.items).sort((a, b) => compareByCreation(positionOf(a), positionOf(b)));
  const items = merged.slice(0, limit);
  const more = merged.length > limit || pages.some((page) => page.next !== null);
  const last = items.at(-1);
  return { items, next: more && last !== undefined ? encodeCursor(positionOf(last)) : null };
}

/** A regular expression that matches text starting with `text` as typed (`a.c` is no pattern). */
export function startsWithPattern(text: string): string {
  return `^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`;
}

/** The part of a MongoDB query that resumes after a cursor's position, in list order. */
function afterQuery(after: string): Filter<Document> {
  const { createdAt, id } = decodeCursor(after);
  const at = new Date(createdAt);
  // The $lte bounds the index scan at the cursor; the $or alone would leave it to a filter.
  return { createdAt: { $lte: at }, $or: [{ createdAt: { $lt: at } }, { createdAt: at, id: { $lt: id } }] };
}

/** Newest first, ties by id: the order of every page and the shape of every cursor (index `…created_id`). */
export const MONGO_ORDER = { createdAt: -1, id: -1 } as const;

/**
 * One page of a MongoDB collection (keys, customers): the filter and the cursor's position as one
 * range read on a `…createdAt, id` index, one more document than asked telling whether a next page
 * exists without counting.
 */
export async function mongoPage<D extends Document, R extends Position>(
  collection: Collection<D>,
  filter: Filter<D>,
  request: PageRequest,
  options: { projection: Document; toRecord: (doc: D) => R },
): Promise<Page<R>> {
  const query = request.after === undefined ? filter : ({ $and: [filter, afterQuery(request.after)] } as Filter<D>);
  const docs = await collection
    // A page the server cannot serve in time answers code 50 (a 503) rather than scan on.
    .find(query, {
      projection: options.projection,
      sort: MONGO_ORDER,
      limit: request.limit + 1,
      maxTimeMS: LIST_MAX_TIME_MS,
    })
    .toArray();
  const items = docs.slice(0, request.limit).map((doc) => options.toRecord(doc as D));
  const last = items.at(-1);
  return { items, next: docs.length > request.limit && last ? encodeCursor(last) : null };
}
