import { compareByCreation, encodeCursor, type Page, type PageRequest, pageOf } from '../paging/page.js';
import { type KeyFilter, type KeyRecord, type KeyStore, keyMatches } from './key-store.js';

/** A key as a list shows it: the record, and whether API_KEYS_FILE or the store holds it. */
export interface ListedKey {
  record: KeyRecord;
  source: 'file' | 'store';
}

/**
 * A page of every key the gateway knows: API_KEYS_FILE's (in memory, filtered here) and the
 * store's (filtered in the store), merged in list order. Both are cut after the same cursor and
 * at the same size, so the first `limit` of the two together are the page, whichever side they
 * come from, and the cursor of its last item resumes both.
 */
export async function pageOfKeys(
  store: Pick<KeyStore, 'page'>,
  fileRecords: readonly KeyRecord[],
  filter: KeyFilter,
  request: PageRequest,
): Promise<Page<ListedKey>> {
  // First: it checks the cursor (BadCursorError) before the store is asked.
  const fromFile = pageOf(
    fileRecords.filter((record) => keyMatches(record, filter)),
    request,
  );
  const fromStore = await store.page(filter, request);
  const merged: ListedKey[] = [
    ...fromFile.items.map((record) => ({ record, source: 'file' as const })),
    ...fromStore.items.map((record) => ({ record, source: 'store' as const })),
  ].sort((a, b) => compareByCreation(a.record, b.record));
  const items = merged.slice(0, request.limit);
  const more = merged.length > request.limit || fromFile.next !== null || fromStore.next !== null;
  const last = items.at(-1);
  return { items, next: more && last ? encodeCursor(last.record) : null };
}
