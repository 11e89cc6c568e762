#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { KeyOwnershipError } from '../customers/key-ownership.js';
import { KeyRuleError } from '../keys/key-operations.js';
import { WINDOWS } from '../limits/windows.js';
import { AdminClient } from './admin-client.js';
import { credits } from './credit-commands.js';
import { customers } from './customer-commands.js';
import { inFlagWords, type Values } from './flags.js';
import { printable } from './format.js';
import { invoice } from './invoice-commands.js';
import { bans, create, history, list, revoke, rotate, show, top, unban, update, usage } from './key-commands.js';
import { leaks } from './leak-commands.js';
import { metering } from './metering-commands.js';
import { COMMANDS, USAGE, UsageError, usageError } from './usage.js';
import { webhooks } from './webhook-commands.js';

/*
 * The keys CLI (`npm run -s keys -- …`, bin animal-store-keys): its options, the command, and how
 * it exits: 0 done, 2 a mistake in how it was called (with the command's usage), 1 anything else.
 */

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      plan: { type: 'string' },
      name: { type: 'string' },
      ...Object.fromEntries(WINDOWS.map((w) => [w.flag.slice(2), { type: 'string' } as const])),
      'plan-limits': { type: 'boolean' },
      'plan-credits': { type: 'boolean' },
      refill: { type: 'string' },
      'refill-every': { type: 'string' },
      'credits-by-hand': { type: 'boolean' },
      'no-credits': { type: 'boolean' },
      scopes: { type: 'string' },
      'plan-scopes': { type: 'boolean' },
      'allow-cidr': { type: 'string', multiple: true },
      'any-address': { type: 'boolean' },
      'expires-at': { type: 'string' },
      'no-expiry': { type: 'boolean' },
      grace: { type: 'string' },
      days: { type: 'string' },
      period: { type: 'string' },
      granularity: { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      csv: { type: 'boolean' },
      window: { type: 'string' },
      sort: { type: 'string' },
      limit: { type: 'string' },
      file: { type: 'string' },
      events: { type: 'string' },
      description: { type: 'string' },
      customer: { type: 'string' },
      'billing-anchor-day': { type: 'string' },
      'time-zone': { type: 'string' },
      'external-id': { type: 'string' },
      after: { type: 'string' },
      prefix: { type: 'string' },
      all: { type: 'boolean' },
      'revoke-keys': { type: 'boolean' },
      add: { type: 'string' },
      reason: { type: 'string' },
      type: { type: 'string' },
      ledger: { type: 'boolean' },
      previous: { type: 'boolean' },
      'idempotency-key': { type: 'string' },
      sha256: { type: 'string' },
      source: { type: 'string' },
      url: { type: 'string' },
      format: { type: 'string' },
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
  if (command === 'webhooks') return webhooks(positionals.slice(1), values);
  if (command === 'customers') return customers(positionals.slice(1), values);
  if (command === 'leaks') return leaks(positionals.slice(1), values);
  if (extra.length > 0) throw usageError(command, `unexpected argument "${extra[0]}"`);
  try {
    await run(command, id, values);
  } catch (err) {
    // What the key rules refuse is a mistake in how the command was called.
    if (err instanceof KeyRuleError) throw usageError(command, err.message);
    // The customer rule speaks the admin API's fields (customerId, limits.perMinute).
    if (err instanceof KeyOwnershipError) throw usageError(command, inFlagWords(err.message));
    throw err;
  }
}

async function run(command: string, id: string | undefined, values: Values): Promise<void> {
  const needId = (): string => {
    if (!id) throw usageError(command, `${command} needs a key id`);
    return id;
  };
  switch (command) {
    case 'create':
      return create(values);
    case 'list':
      return list(values);
    case 'show':
      return show(needId(), values);
    case 'update':
      return update(needId(), values);
    case 'rotate':
      return rotate(needId(), values);
    case 'usage':
      return usage(needId(), values);
    case 'history':
      return history(needId(), values);
    case 'top':
      return top(values);
    case 'revoke':
      return revoke(needId(), values);
    case 'unban':
      return unban(needId(), values);
    case 'bans':
      return bans(values);
    case 'credits':
      return credits(AdminClient.fromEnv(process.env), 'keys', needId(), values);
    case 'invoice':
      return invoice(AdminClient.fromEnv(process.env), 'keys', needId(), values);
    case 'metering':
      if (id) throw usageError(command, `unexpected argument "${id}"`);
      return metering(values);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if ((err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    const command = process.argv[2] ?? '';
    err = command in COMMANDS ? usageError(command, (err as Error).message) : new UsageError((err as Error).message);
  }
  // The message may quote the admin API, and so a record's text: each line made printable, its
  // line breaks kept (a usage mistake ends with the command's usage line).
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`keys: ${message.split('\n').map(printable).join('\n')}\n`);
  process.exit(err instanceof UsageError ? 2 : 1);
});
