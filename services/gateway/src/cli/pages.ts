import type { AdminClient } from './admin-client.js';
import { boundedInt, type Values } from './flags.js';
import { jsonLine } from './format.js';
import { usageError } from './usage.js';

/** A list answer of the admin API: a page, and the cursor of the next one. */
export interface ListPage<T> {
  items: T[];
  next: string | null;
}

/**
 * A list command's query from its flags: `[flag, query parameter]` pairs, then `--limit` (1–500)
 * and `--after`, as the admin API's paged lists take them.
 */
export function pageQuery(command: string, values: Values, filters: ReadonlyArray<[string, string]>): URLSearchParams {
  const query = new URLSearchParams();
  for (const [flag, param] of [...filters, ['after', 'after'] as const]) {
    const value = values[flag];
    if (value === undefined) continue;
    if (typeof value !== 'string' || value.length === 0) throw usageError(command, `--${flag} needs a value`);
    query.set(param, value);
  }
  if (values.limit !== undefined) query.set('limit', String(boundedInt(command, '--limit', values.limit, 500)));
  return query;
}

/**
 * One page (what --limit and --after ask for), or with --all every page from there in turn, each
 * printed as it comes so a list of a million keys is never held whole: text as `show` makes it
 * (with a line naming the next cursor when one follows), JSON as the page (one line), or with
 * --all one line per item.
 */
export async function printPages<T>(
  admin: AdminClient,
  path: string,
  query: URLSearchParams,
  values: Values,
  show: (page: ListPage<T>, more: boolean) => string,
  refused: (err: unknown) => never,
): Promise<void> {
  const write = (text: string) => process.stdout.write(text);
  for (;;) {
    const page = await admin.request<ListPage<T>>('GET', `${path}?${query}`).catch(refused);
    if (!values.all) {
      write(values.json ? `${jsonLine(page)}\n` : show(page, page.next !== null));
      return;
    }
    if (values.json) for (const item of page.items) write(`${jsonLine(item)}\n`);
    else write(show(page, false));
    if (page.next === null) return;
    query.set('after', page.next);
  }
}
