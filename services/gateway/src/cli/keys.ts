#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { isPlainText, PLAIN_TEXT_RULE } from '@animal-store/common/validation.js';
import type { Static } from 'typebox';
import {
  type CreatedKeySchema,
  DEFAULT_GRACE_SECONDS,
  type KeyViewSchema,
  MAX_GRACE_SECONDS,
  type RotatedKeySchema,
  type UsageSchema,
} from '../admin/schemas.js';
import { createKey, newSecret } from '../keys/create-key.js';
import { parseExpiry, previousSecretEnds } from '../keys/expiry.js';
import { applyChanges } from '../keys/key-store.js';
import { appendToKeysFile, type KeyFileEntry, toKeyFileEntry, updateKeysFileEntry } from '../keys/keys-file.js';
import {
  isPlan,
  type LimitNames,
  type Limits,
  limitsAfterChange,
  limitsFor,
  PLANS,
  type Plan,
  planProblem,
} from '../plans.js';
import { AdminClient, UsageError } from './admin-client.js';
import { fields, jsonLine, printable, table, when } from './format.js';

type KeyView = Static<typeof KeyViewSchema>;
type Usage = Static<typeof UsageSchema>;

const COMMANDS: Record<string, string> = {
  create:
    'create --plan free|pro|business|enterprise [--name NAME] [--per-minute N --per-day N] [--expires-at T] [--file PATH]',
  list: 'list',
  show: 'show ID',
  update:
    'update ID [--plan P] [--per-minute N --per-day N] [--name NAME] [--expires-at T | --no-expiry] [--file PATH]',
  rotate: 'rotate ID [--grace SECONDS] [--file PATH]',
  usage: 'usage ID',
  revoke: 'revoke ID',
  unban: 'unban ID',
};

const USAGE = `usage: npm run -s keys -- <command> [options] [--json]

  ${COMMANDS.create}
      Make a key. --per-minute/--per-day: enterprise only. --expires-at: RFC 3339, in the future.
  ${COMMANDS.list}
      Every key, as a table.
  ${COMMANDS.show}
      One key.
  ${COMMANDS.update}
      Change a key's plan, limits, name or expiry. A plan change applies on the next request on
      every replica; counts carry over. Leaving enterprise drops its limits.
  ${COMMANDS.rotate}
      New secret, same id (one quota, one ban). The old secret works for --grace seconds
      (default ${DEFAULT_GRACE_SECONDS}, at most ${MAX_GRACE_SECONDS}; 0 ends it now), then gets 401. Prints the new key once.
  ${COMMANDS.usage}
      Live windows (limit, used, remaining, reset), ban and refusals; counts as no request.
  ${COMMANDS.revoke}
      Revoke a key (both secrets, on every replica within 5 s).
  ${COMMANDS.unban}
      Lift a key's ban and forget its refusals.

  --json   print JSON (one line) instead of text
  --file   work on an API_KEYS_FILE (hashes only) instead of calling the admin API;
           roll the gateway afterwards to load it

The admin API is reached at ADMIN_URL (http://host:port or host:port), else at
ADMIN_HOST/ADMIN_PORT, else http://127.0.0.1:8081, with ADMIN_TOKEN.
A plaintext key is printed once, by create and rotate; it is never stored.`;

/** The CLI speaks in its own flags, not the admin API's JSON fields. */
const FLAG_NAMES: LimitNames = {
  plan: '--plan',
  limits: '--per-minute and --per-day',
  perMinute: '--per-minute',
  perDay: '--per-day',
};

type Values = Record<string, string | boolean | undefined>;

/** Thrown for a command's own usage mistakes: the message, then that command's usage line. */
function usageError(command: string, message: string): UsageError {
  const line = COMMANDS[command];
  return new UsageError(line ? `${message}\nusage: npm run -s keys -- ${line}` : message);
}

function positiveInt(command: string, name: string, raw: unknown): number | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !/^[1-9][0-9]*$/.test(raw)) {
    throw usageError(command, `--${name} must be a positive integer`);
  }
  return Number(raw);
}

function limitsFrom(command: string, values: Values): Limits | undefined {
  const perMinute = positiveInt(command, 'per-minute', values['per-minute']);
  const perDay = positiveInt(command, 'per-day', values['per-day']);
  if ((perMinute === undefined) !== (perDay === undefined)) {
    throw usageError(command, 'give both --per-minute and --per-day, or neither');
  }
  return perMinute && perDay ? { perMinute, perDay } : undefined;
}

function expiryFrom(command: string, values: Values): string | null | undefined {
  if (values['no-expiry'] && values['expires-at'] !== undefined) {
    throw usageError(command, 'give --expires-at or --no-expiry, not both');
  }
  if (values['no-expiry']) return null;
  if (values['expires-at'] === undefined) return undefined;
  const parsed = parseExpiry(values['expires-at'], '--expires-at', Date.now());
  if (parsed.problem !== undefined) throw usageError(command, parsed.problem);
  return parsed.expiresAt;
}

function limitsText(limits: Limits): string {
  return `${limits.perMinute}/min, ${limits.perDay}/day`;
}

function print(values: Values, json: unknown, text: string): void {
  process.stdout.write(values.json ? `${jsonLine(json)}\n` : text);
}

/** --name as the admin API takes a name: text people read, never terminal controls. */
function nameFrom(command: string, values: Values): string | undefined {
  const name = values.name;
  if (typeof name !== 'string') return undefined;
  if (!isPlainText(name)) throw usageError(command, `--name ${PLAIN_TEXT_RULE}`);
  return name;
}

function status(k: KeyView, now: number): string {
  if (k.revokedAt) return 'revoked';
  if (k.expiresAt && Date.parse(k.expiresAt) <= now) return 'expired';
  if (k.bannedUntil) return `banned until ${when(k.bannedUntil)}`;
  return 'active';
}

function showKey(k: KeyView): string {
  const previousLive = k.previousKeyExpiresAt && Date.parse(k.previousKeyExpiresAt) > Date.now();
  return fields([
    ['id', k.id],
    ['name', k.name],
    ['plan', k.plan],
    ['limits', limitsText(k.limits)],
    ['status', status(k, Date.now())],
    ['source', k.source === 'file' ? 'API_KEYS_FILE' : 'store'],
    ['prefix', k.prefix],
    ['created', when(k.createdAt)],
    ['expires', when(k.expiresAt) ?? 'never'],
    ['old secret until', previousLive ? when(k.previousKeyExpiresAt) : undefined],
    ['updated', when(k.updatedAt)],
    ['revoked', when(k.revokedAt)],
    ['banned until', when(k.bannedUntil)],
  ]);
}

async function create(values: Values): Promise<void> {
  const plan = values.plan;
  if (plan === undefined) throw usageError('create', 'create needs --plan');
  const limits = limitsFrom('create', values);
  const problem = planProblem(plan, limits, FLAG_NAMES);
  if (problem) throw usageError('create', problem);
  const expiresAt = expiryFrom('create', values) ?? undefined;
  const name = nameFrom('create', values);
  let created: { id: string; key: string; plan: Plan; limits: Limits; expiresAt?: string | undefined };
  if (typeof values.file === 'string') {
    const { key, record } = createKey({ plan: plan as Plan, name, limits, expiresAt });
    await appendToKeysFile(values.file, toKeyFileEntry(record));
    created = { id: record.id, key, plan: record.plan, limits: limitsFor(record.plan, record.limits), expiresAt };
  } else {
    created = await AdminClient.fromEnv(process.env).request<Static<typeof CreatedKeySchema>>('POST', '/admin/keys', {
      plan,
      ...(name ? { name } : {}),
      ...(limits ? { limits } : {}),
      ...(expiresAt ? { expiresAt } : {}),
    });
  }
  const out = {
    id: created.id,
    key: created.key,
    plan: created.plan,
    limits: created.limits,
    ...(created.expiresAt ? { expiresAt: created.expiresAt } : {}),
  };
  print(
    values,
    out,
    `created ${printable(out.id)} (${out.plan}: ${limitsText(out.limits)}${out.expiresAt ? `, expires ${when(out.expiresAt)}` : ''})\n` +
      `key: ${out.key}\n(store it now: it is not shown again)\n`,
  );
}

/** A file entry after an update: the same rules as the admin API's PATCH. */
function updatedEntry(entry: KeyFileEntry, values: Values): KeyFileEntry {
  const plan = (values.plan as Plan | undefined) ?? entry.plan;
  const limits = limitsAfterChange(plan, limitsFrom('update', values), entry.limits);
  const problem = planProblem(plan, limits, FLAG_NAMES);
  if (problem) throw usageError('update', problem);
  const expiresAt = expiryFrom('update', values);
  const name = nameFrom('update', values);
  const next = structuredClone(entry);
  applyChanges(next, {
    plan,
    limits: limits ?? null,
    ...(name !== undefined ? { name } : {}),
    ...(expiresAt !== undefined ? { expiresAt } : {}),
  });
  return toKeyFileEntry(next);
}

async function update(id: string, values: Values): Promise<void> {
  const given = ['plan', 'per-minute', 'per-day', 'name', 'expires-at', 'no-expiry'].filter(
    (f) => values[f] !== undefined,
  );
  if (given.length === 0) {
    throw usageError(
      'update',
      'nothing to change: give --plan, --per-minute/--per-day, --name, --expires-at or --no-expiry',
    );
  }
  if (values.plan !== undefined) {
    if (!isPlan(values.plan)) throw usageError('update', `${FLAG_NAMES.plan} must be one of ${PLANS.join(', ')}`);
  }
  if (typeof values.file === 'string') {
    const entry = await updateKeysFileEntry(values.file, id, (e) => updatedEntry(e, values));
    const limits = limitsFor(entry.plan, entry.limits);
    print(
      values,
      { ...entry, limits },
      `updated ${id} in ${values.file} (${entry.plan}: ${limitsText(limits)}, expires ${when(entry.expiresAt) ?? 'never'})\n` +
        'roll the gateway to apply it\n',
    );
    return;
  }
  const limits = limitsFrom('update', values);
  const expiresAt = expiryFrom('update', values);
  const name = nameFrom('update', values);
  const view = await AdminClient.fromEnv(process.env).request<KeyView>(
    'PATCH',
    `/admin/keys/${encodeURIComponent(id)}`,
    {
      ...(values.plan !== undefined ? { plan: values.plan } : {}),
      ...(limits ? { limits } : {}),
      ...(name !== undefined ? { name } : {}),
      ...(expiresAt !== undefined ? { expiresAt } : {}),
    },
  );
  print(values, view, `updated ${printable(id)}\n${showKey(view)}`);
}

async function rotate(id: string, values: Values): Promise<void> {
  let grace: number | undefined;
  if (values.grace !== undefined) {
    const raw = values.grace;
    if (typeof raw !== 'string' || !/^(0|[1-9][0-9]*)$/.test(raw) || Number(raw) > MAX_GRACE_SECONDS) {
      throw usageError('rotate', `--grace must be a whole number of seconds from 0 to ${MAX_GRACE_SECONDS}`);
    }
    grace = Number(raw);
  }
  let out: Omit<Static<typeof RotatedKeySchema>, 'createdAt'> & { createdAt?: string };
  if (typeof values.file === 'string') {
    const secret = newSecret();
    const now = Date.now();
    const entry = await updateKeysFileEntry(values.file, id, (e) => ({
      ...e,
      sha256: secret.sha256,
      previous: { sha256: e.sha256, expiresAt: previousSecretEnds(e.expiresAt, now, grace ?? DEFAULT_GRACE_SECONDS) },
    }));
    out = {
      id: entry.id,
      key: secret.key,
      plan: entry.plan,
      limits: limitsFor(entry.plan, entry.limits),
      name: entry.name,
      previousKeyExpiresAt: (entry.previous as { expiresAt: string }).expiresAt,
    };
  } else {
    out = await AdminClient.fromEnv(process.env).request<Static<typeof RotatedKeySchema>>(
      'POST',
      `/admin/keys/${encodeURIComponent(id)}/rotate`,
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

function showUsage(u: Usage): string {
  const row = (name: string, w: Usage['windows']['minute']) => [
    name,
    String(w.limit),
    String(w.used),
    String(w.remaining),
    when(w.resetAt) ?? 'not started',
  ];
  return (
    `${u.id} (${u.plan})\n` +
    table(
      ['WINDOW', 'LIMIT', 'USED', 'REMAINING', 'RESETS'],
      [row('minute', u.windows.minute), row('day', u.windows.day)],
    ) +
    fields([
      ['ban', u.ban ? `until ${when(u.ban.until)}` : 'none'],
      ['refusals', `${u.refusals} (counted toward a ban now)`],
    ])
  );
}

async function list(values: Values): Promise<void> {
  const keys = await AdminClient.fromEnv(process.env).request<KeyView[]>('GET', '/admin/keys');
  const now = Date.now();
  const rows = keys.map((k) => [
    k.id,
    k.plan,
    limitsText(k.limits),
    status(k, now),
    when(k.expiresAt) ?? '-',
    k.source === 'file' ? 'file' : 'store',
    k.name,
  ]);
  print(
    values,
    keys,
    keys.length === 0 ? 'no keys\n' : table(['ID', 'PLAN', 'LIMITS', 'STATUS', 'EXPIRES', 'SOURCE', 'NAME'], rows),
  );
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      plan: { type: 'string' },
      name: { type: 'string' },
      'per-minute': { type: 'string' },
      'per-day': { type: 'string' },
      'expires-at': { type: 'string' },
      'no-expiry': { type: 'boolean' },
      grace: { type: 'string' },
      file: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, id, ...extra] = positionals;
  if (values.help || !command) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  if (!(command in COMMANDS)) {
    throw new UsageError(
      `unknown command "${command}"; commands: ${Object.keys(COMMANDS).join(', ')} (--help for their options)`,
    );
  }
  if (extra.length > 0) throw usageError(command, `unexpected argument "${extra[0]}"`);
  const needId = (): string => {
    if (!id) throw usageError(command, `${command} needs a key id`);
    return id;
  };
  const client = () => AdminClient.fromEnv(process.env);
  switch (command) {
    case 'create':
      return create(values);
    case 'list':
      return list(values);
    case 'show': {
      const key = await client().request<KeyView>('GET', `/admin/keys/${encodeURIComponent(needId())}`);
      return print(values, key, showKey(key));
    }
    case 'update':
      return update(needId(), values);
    case 'rotate':
      return rotate(needId(), values);
    case 'usage': {
      const usage = await client().request<Usage>('GET', `/admin/keys/${encodeURIComponent(needId())}/usage`);
      return print(values, usage, showUsage(usage));
    }
    case 'revoke':
      await client().request('DELETE', `/admin/keys/${encodeURIComponent(needId())}`);
      return print(values, { id, revoked: true }, `revoked ${id}\n`);
    case 'unban':
      await client().request('DELETE', `/admin/keys/${encodeURIComponent(needId())}/ban`);
      return print(values, { id, banLifted: true }, `lifted the ban on ${id}\n`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if ((err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    const command = process.argv[2] ?? '';
    err = command in COMMANDS ? usageError(command, (err as Error).message) : new UsageError((err as Error).message);
  }
  // The message may quote the admin API, and so a record's text.
  process.stderr.write(`keys: ${printable(err instanceof Error ? err.message : String(err))}\n`);
  process.exit(err instanceof UsageError ? 2 : 1);
});
