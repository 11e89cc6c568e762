import type { Static } from 'typebox';
import type { LeakListSchema, LeakSchema } from '../api/leak-schemas.js';
import { AdminClient } from './admin-client.js';
import type { Values } from './flags.js';
import { jsonLine, printable, table, when } from './format.js';
import { usageError } from './usage.js';

/* `keys leaks report|list`: leaked keys through the admin API (docs/leaks.md). */

type Leak = Static<typeof LeakSchema>;

function print(values: Values, json: unknown, text: string): void {
  process.stdout.write(values.json ? `${jsonLine(json)}\n` : text);
}

/** What a leak did, in words: the grace's end after a rotation. */
function done(leak: Leak): string {
  if (leak.response === 'rotate' && leak.leakedSecretEndsAt)
    return `rotated, old secret ends ${when(leak.leakedSecretEndsAt)}`;
  return leak.response === 'revoke' ? 'revoked' : 'notified';
}

function leaksTable(leaks: Leak[]): string {
  if (leaks.length === 0) return 'no leaks\n';
  const rows = leaks.map((l) => [l.id, when(l.reportedAt) ?? '', l.keyId, l.reporter, done(l), l.source, l.url ?? '']);
  return table(['ID', 'REPORTED', 'KEY', 'BY', 'DONE', 'SOURCE', 'URL'], rows);
}

/** `leaks <action> [KEY]`: the action's own arguments are checked here. */
export async function leaks(args: string[], values: Values): Promise<void> {
  const [action, key, ...extra] = args;
  if (extra.length > 0) throw usageError('leaks', `unexpected argument "${extra[0]}"`);
  const admin = AdminClient.fromEnv(process.env);
  switch (action) {
    case 'report': {
      const sha256 = typeof values.sha256 === 'string' ? values.sha256 : undefined;
      if ((key === undefined) === (sha256 === undefined)) {
        throw usageError('leaks', 'leaks report needs the leaked key, or --sha256 HASH, not both');
      }
      if (typeof values.source !== 'string')
        throw usageError('leaks', 'leaks report needs --source (where it was found)');
      const leak = await admin.request<Leak>('POST', '/admin/leaks', {
        ...(key !== undefined ? { key } : { sha256 }),
        source: values.source,
        ...(typeof values.url === 'string' ? { url: values.url } : {}),
      });
      print(values, leak, `${leak.id}: key ${printable(leak.keyId)} ${done(leak)}\n`);
      return;
    }
    case 'list': {
      if (key !== undefined) throw usageError('leaks', `unexpected argument "${key}"`);
      const limit = typeof values.limit === 'string' ? `?limit=${encodeURIComponent(values.limit)}` : '';
      const list = await admin.request<Static<typeof LeakListSchema>>('GET', `/admin/leaks${limit}`);
      print(values, list, leaksTable(list.items));
      return;
    }
    default:
      throw usageError('leaks', action ? `unknown leaks action "${action}"` : 'leaks needs an action');
  }
}
