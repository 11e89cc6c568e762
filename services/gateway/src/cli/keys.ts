#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { generateApiKey, hashApiKey, newKeyId } from '../keys/api-key.js';
import { appendToKeysFile } from '../keys/keys-file.js';
import { type Limits, limitsFor, planProblem } from '../plans.js';

const USAGE = `usage: npm run keys -- <command> [options]

  create --plan free|pro|business|enterprise [--name NAME]
         [--per-minute N --per-day N]   (enterprise only)
         [--file PATH]                   append the record to an API_KEYS_FILE instead of calling the admin API
         [--json]                        print one JSON object on one line
  list                                   list keys (admin API)
  show ID                                show one key (admin API)
  revoke ID                              revoke a key (admin API)
  unban ID                               lift a key's ban (admin API)

The admin API is reached at ADMIN_URL (default http://127.0.0.1:8081) with ADMIN_TOKEN.
The plaintext key is printed once, by create; it is never stored.`;

class UsageError extends Error {}

function positiveInt(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^[1-9][0-9]*$/.test(raw)) throw new UsageError(`--${name} must be a positive integer`);
  return Number(raw);
}

async function admin(method: string, path: string, body?: unknown): Promise<unknown> {
  const base = process.env.ADMIN_URL ?? 'http://127.0.0.1:8081';
  const token = process.env.ADMIN_TOKEN;
  if (!token) throw new UsageError('set ADMIN_TOKEN to use the admin API (or use create --file)');
  const response = await fetch(new URL(path, base), {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const message = (data as { message?: string } | null)?.message ?? response.statusText;
    throw new Error(`admin API answered ${response.status}: ${message}`);
  }
  return data;
}

async function create(values: Record<string, string | boolean | undefined>): Promise<void> {
  const plan = values.plan;
  const perMinute = positiveInt('per-minute', values['per-minute'] as string | undefined);
  const perDay = positiveInt('per-day', values['per-day'] as string | undefined);
  if ((perMinute === undefined) !== (perDay === undefined)) {
    throw new UsageError('give both --per-minute and --per-day, or neither');
  }
  const limits: Limits | undefined = perMinute && perDay ? { perMinute, perDay } : undefined;
  const problem = planProblem(plan, limits);
  if (problem) throw new UsageError(problem);
  const name = values.name as string | undefined;
  let created: { id: string; key: string; plan: string; limits: Limits };
  if (typeof values.file === 'string') {
    const key = generateApiKey();
    const id = newKeyId();
    const typedPlan = plan as Parameters<typeof limitsFor>[0];
    await appendToKeysFile(values.file, {
      id,
      name: name ?? id,
      plan: typedPlan,
      ...(limits ? { limits } : {}),
      sha256: hashApiKey(key),
    });
    created = { id, key, plan: typedPlan, limits: limitsFor(typedPlan, limits) };
  } else {
    created = (await admin('POST', '/admin/keys', {
      plan,
      ...(name ? { name } : {}),
      ...(limits ? { limits } : {}),
    })) as typeof created;
  }
  const out = { id: created.id, key: created.key, plan: created.plan, limits: created.limits };
  if (values.json) {
    process.stdout.write(`${JSON.stringify(out)}\n`);
  } else {
    process.stdout.write(
      `created ${out.id} (${out.plan}: ${out.limits.perMinute}/min, ${out.limits.perDay}/day)\n` +
        `key: ${out.key}\n(store it now: it is not shown again)\n`,
    );
  }
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
      file: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, id] = positionals;
  if (values.help || !command) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const needId = () => {
    if (!id) throw new UsageError(`${command} needs a key id`);
    return encodeURIComponent(id);
  };
  switch (command) {
    case 'create':
      return create(values);
    case 'list':
      process.stdout.write(`${JSON.stringify(await admin('GET', '/admin/keys'), null, 2)}\n`);
      return;
    case 'show':
      process.stdout.write(`${JSON.stringify(await admin('GET', `/admin/keys/${needId()}`), null, 2)}\n`);
      return;
    case 'revoke':
      await admin('DELETE', `/admin/keys/${needId()}`);
      process.stdout.write(`revoked ${id}\n`);
      return;
    case 'unban':
      await admin('DELETE', `/admin/keys/${needId()}/ban`);
      process.stdout.write(`lifted the ban on ${id}\n`);
      return;
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if ((err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) err = new UsageError((err as Error).message);
  if (err instanceof UsageError) process.stderr.write(`keys: ${err.message}\n\n${USAGE}\n`);
  else process.stderr.write(`keys: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(err instanceof UsageError ? 2 : 1);
});
