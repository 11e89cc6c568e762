import type { Static } from 'typebox';
import type { CreatedKeySchema, RotatedKeySchema } from '../api/schemas.js';
import { createdKey } from '../api/shared.js';
import { limitsFor, scopesFor } from '../plans/plans.js';
import { AdminApiError, AdminClient } from './admin-client.js';
import { createInFile, localPlans, rotateInFile, updateInFile } from './file-backend.js';
import { boundedInt, createRequest, graceFrom, inFlagWords, updateRequest, type Values } from './flags.js';
import { jsonLine, printable, when } from './format.js';
import { type History, historyChart, type Top, topTable } from './history-text.js';
import {
  type BanList,
  bansTable,
  type KeyView,
  keysTable,
  limitsText,
  showKey,
  showUsage,
  type Usage,
} from './key-text.js';
import { pageQuery, printPages } from './pages.js';
import { usageError } from './usage.js';

/* Each command: through the admin API, or with --file on an API_KEYS_FILE; text or --json out. */

function print(values: Values, json: unknown, text: string): void {
  process.stdout.write(values.json ? `${jsonLine(json)}\n` : text);
}

const admin = () => AdminClient.fromEnv(process.env);

/**
 * The admin API's 400 for a key's fields: a mistake on the command line (exit 2, as with --file),
 * said with the flags that were typed rather than the API's JSON fields.
 */
function refused(command: string, err: unknown): never {
  if (err instanceof AdminApiError && err.status === 400) throw usageError(command, inFlagWords(err.apiMessage));
  throw err;
}
const keyPath = (id: string) => `/admin/keys/${encodeURIComponent(id)}`;

export async function create(values: Values): Promise<void> {
  const request = createRequest(values);
  // What the admin API answers, field for field, whichever holds the key.
  let out: Static<typeof CreatedKeySchema>;
  if (typeof values.file === 'string') {
    // The admin API checks against the gateway's plans; a file against PLANS_FILE's, here.
    const plans = localPlans();
    const { key: secret, record } = await createInFile(values.file, plans, request);
    out = createdKey({ plans }, record, secret);
  } else {
    out = await admin()
      .request<Static<typeof CreatedKeySchema>>('POST', '/admin/keys', request)
      .catch((err: unknown) => refused('create', err));
  }
  print(
    values,
    out,
    `created ${printable(out.id)} (${out.plan}: ${limitsText(out.limits)}${out.expiresAt ? `, expires ${when(out.expiresAt)}` : ''})\n` +
      `key: ${out.key}\n(store it now: it is not shown again)\n`,
  );
}

export async function update(id: string, values: Values): Promise<void> {
  const change = updateRequest(values);
  if (typeof values.file === 'string') {
    const plans = localPlans();
    const entry = await updateInFile(values.file, plans, id, change);
    const limits = limitsFor(plans, entry.plan, entry.limits);
    print(
      values,
      { ...entry, limits },
      `updated ${id} in ${values.file} (${entry.plan}: ${limitsText(limits)}, expires ${when(entry.expiresAt) ?? 'never'})\n` +
        'roll the gateway to apply it\n',
    );
    return;
  }
  const view = await admin()
    .request<KeyView>('PATCH', keyPath(id), change)
    .catch((err: unknown) => refused('update', err));
  print(values, view, `updated ${printable(id)}\n${showKey(view)}`);
}

export async function rotate(id: string, values: Values): Promise<void> {
  const grace = graceFrom(values);
  let out: Omit<Static<typeof RotatedKeySchema>, 'createdAt'> & { createdAt?: string };
  if (typeof values.file === 'string') {
    const plans = localPlans();
    const { key, record, previousKeyExpiresAt } = await rotateInFile(values.file, plans, id, grace);
    out = {
      id: record.id,
      key,
      plan: record.plan,
      limits: limitsFor(plans, record.plan, record.limits),
      scopes: [...scopesFor(plans, record.plan, record.scopes)],
      name: record.name,
      previousKeyExpiresAt,
    };
  } else {
    out = await admin().request<Static<typeof RotatedKeySchema>>(
      'POST',
      `${keyPath(id)}/rotate`,
      grace === undefined ? {} : { gracePeriodSeconds: grace },
    );
  }
  print(
    values,
    out,
    `rotated ${printable(out.id)}: the old key works until ${when(out.previousKeyExpiresAt)}\n` +
      `key: ${out.key}\n(store it now: it is not shown again)\n` +
      (typeof values.file === 'string' ? `roll the gateway to load ${values.file}\n` : ''),
  );
}

/** `list`: a page of keys (or --all of them), filtered by the admin API's store. */
export async function list(values: Values): Promise<void> {
  const query = pageQuery('list', values, [
    ['name', 'name'],
    ['plan', 'plan'],
    ['customer', 'customerId'],
    ['prefix', 'prefix'],
  ]);
  await printPages<KeyView>(
    admin(),
    '/admin/keys',
    query,
    values,
    (page, more) => keysTable(page.items) + (more ? `more: --after ${page.next}\n` : ''),
    (err) => refused('list', err),
  );
}

export async function show(id: string, values: Values): Promise<void> {
  const key = await admin().request<KeyView>('GET', keyPath(id));
  print(values, key, showKey(key));
}

export async function usage(id: string, values: Values): Promise<void> {
  const found = await admin().request<Usage>('GET', `${keyPath(id)}/usage`);
  print(values, found, showUsage(found));
}

export async function revoke(id: string, values: Values): Promise<void> {
  await admin().request('DELETE', keyPath(id));
  print(values, { id, revoked: true }, `revoked ${id}\n`);
}

export async function unban(id: string, values: Values): Promise<void> {
  await admin().request('DELETE', `${keyPath(id)}/ban`);
  print(values, { id, banLifted: true }, `lifted the ban on ${id}\n`);
}

export async function bans(values: Values): Promise<void> {
  const query = values.limit === undefined ? '' : `?limit=${boundedInt('bans', '--limit', values.limit, 500)}`;
  const found = await admin().request<BanList>('GET', `/admin/bans${query}`);
  print(values, found, bansTable(found));
}

/** The usage history lives in the gateway (Redis or its memory); a keys file has none. */
function needsAdminApi(command: string, values: Values): void {
  if (typeof values.file === 'string') {
    throw usageError(command, `${command} reads the gateway's usage history through the admin API; --file has none`);
  }
}

export async function history(id: string, values: Values): Promise<void> {
  needsAdminApi('history', values);
  if (values.period !== undefined) {
    if (values.period !== 'current' && values.period !== 'previous') {
      throw usageError('history', '--period must be current or previous (the calendar month in UTC)');
    }
    if (values.days !== undefined) throw usageError('history', 'give --days or --period, not both');
    const month = await admin().request<History>(
      'GET',
      `${keyPath(id)}/usage/history?granularity=day&period=${values.period}`,
    );
    print(values, month, historyChart(month));
    return;
  }
  const days = values.days === undefined ? 7 : boundedInt('history', '--days', values.days, 400);
  // Up to two days by the hour, longer by the day: a row each either way.
  const granularity = days <= 2 ? 'hour' : 'day';
  const now = Date.now();
  const step = granularity === 'hour' ? 3_600_000 : 86_400_000;
  const from = new Date(now - (now % step) - (granularity === 'hour' ? days * 24 - 1 : days - 1) * step).toISOString();
  const found = await admin().request<History>(
    'GET',
    `${keyPath(id)}/usage/history?granularity=${granularity}&from=${encodeURIComponent(from)}`,
  );
  print(values, found, historyChart(found));
}

export async function top(values: Values): Promise<void> {
  needsAdminApi('top', values);
  const query = new URLSearchParams();
  if (values.window !== undefined) query.set('window', String(values.window));
  if (values.sort !== undefined) query.set('sort', String(values.sort));
  if (values.limit !== undefined) query.set('limit', String(boundedInt('top', '--limit', values.limit, 1000)));
  const found = await admin().request<Top>('GET', `/admin/usage${query.size ? `?${query}` : ''}`);
  print(values, found, topTable(found));
}
