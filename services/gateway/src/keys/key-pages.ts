import { mergedPage, type Page, type PageRequest, pageOf } from '../paging/page.js';
import { type KeyFilter, type KeyRecord, type KeyStore, keyMatches } from './key-store.js';

/** A key as a list shows it: the record, and whether API_KEYS_FILE or the store holds it. */
export interface ListedKey {
  record: KeyRecord;
  source: 'file' | 'store';
}

/**
 * A page of every key the gateway knows: API_KEYS_FILE's (in memory, filtered here) and the
 * store's (filtered in the store), merged in list order (mergedPage).
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
  const tagged = (page: Page<KeyRecord>, source: ListedKey['source']): Page<ListedKey> => ({
    items: page.items.map((record) => ({ record, source })),
    next: page.next,
  });
  return mergedPage([tagged(fromFile, 'file'), tagged(fromStore, 'store')], request.limit, (item) => item.record);
}
