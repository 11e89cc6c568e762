import { DEFAULT_GRACE_SECONDS, MAX_GRACE_SECONDS } from '../keys/key-operations.js';

/** A mistake in how the CLI was called or configured: exit 2, with the command's usage. */
export class UsageError extends Error {}

export const COMMANDS: Record<string, string> = {
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

export const USAGE = `usage: npm run -s keys -- <command> [options] [--json]

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

/** A command's own usage mistake: the message, then that command's usage line. */
export function usageError(command: string, message: string): UsageError {
  const line = COMMANDS[command];
  return new UsageError(line ? `${message}\nusage: npm run -s keys -- ${line}` : message);
}
