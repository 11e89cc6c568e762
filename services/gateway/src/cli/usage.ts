import { DEFAULT_GRACE_SECONDS, MAX_GRACE_SECONDS } from '../keys/key-operations.js';
import { WINDOWS } from '../limits/windows.js';
import { SCOPES } from '../plans/plans.js';

/** A mistake in how the CLI was called or configured: exit 2, with the command's usage. */
export class UsageError extends Error {}

export const COMMANDS: Record<string, string> = {
  create: `create --plan PLAN | --customer ID [--name NAME] [${WINDOWS.map((w) => w.flag).join('|')} N]… [--scopes LIST] [--allow-cidr CIDR]… [--expires-at T] [--file PATH]`,
  list: 'list [--name PREFIX] [--plan P] [--customer ID] [--prefix ask_…] [--limit N] [--after CURSOR | --all]',
  show: 'show ID',
  update:
    'update ID [--plan P] [--per-… N | --plan-limits] [--scopes LIST | --plan-scopes] [--allow-cidr CIDR… | --any-address] [--name NAME] [--expires-at T | --no-expiry] [--refill N [--refill-every period|day] | --credits-by-hand | --no-credits | --plan-credits] [--file PATH]',
  rotate: 'rotate ID [--grace SECONDS] [--file PATH]',
  usage: 'usage ID',
  history: 'history ID [--days N | --period current|previous]',
  top: 'top [--window 24h|7d|…] [--sort admitted|refused|units|forbidden] [--limit N]',
  revoke: 'revoke ID',
  unban: 'unban ID',
  bans: 'bans [--limit N]',
  credits:
    'credits ID [--ledger [--limit N] [--after CURSOR | --all]] [--add N --reason TEXT [--type topup|grant|adjustment] [--idempotency-key K]]',
  invoice: 'invoice ID [--previous] [--csv]',
  customers:
    'customers create --name NAME --plan PLAN [--per-… N]… [--billing-anchor-day D] [--time-zone TZ] [--external-id X] [--refill N [--refill-every period|day] | --credits-by-hand] | customers list [--name PREFIX] [--plan P] [--external-id X] [--limit N] [--after CURSOR | --all] | customers show ID | customers update ID [--name|--plan|--per-…|--plan-limits|--billing-anchor-day|--time-zone|--external-id|--refill N [--refill-every period|day]|--credits-by-hand|--no-credits|--plan-credits] | customers delete ID [--revoke-keys] | customers usage ID [--granularity hour|day|period] [--period current|previous | --from T --to T] [--csv] | customers credits ID [--ledger [--limit N] [--after CURSOR | --all]] [--add N --reason TEXT [--type topup|grant|adjustment] [--idempotency-key K]] | customers invoice ID [--previous] [--csv]',
  metering: 'metering [--after CURSOR] [--limit N] [--all] [--format cloudevents|stripe-meter-events]',
  webhooks: 'webhooks add URL --events LIST [--description TEXT] | webhooks list | webhooks rm ID | webhooks test ID',
  leaks: 'leaks report KEY | --sha256 HASH --source TEXT [--url URL] | leaks list [--limit N]',
};

export const USAGE = `usage: npm run -s keys -- <command> [options] [--json]

  ${COMMANDS.create}
      Make a key of a plan in force (GET /admin/plans; the spec's free, pro, business, enterprise
      unless PLANS_FILE says otherwise). --per-…: its own limits over its plan's windows (a plan
      without windows, such as enterprise, needs them). --scopes: a comma-separated list of
      ${SCOPES.join(', ')} (default: its plan's). --allow-cidr: an address or CIDR it may be used
      from, repeatable (default: any). --expires-at: RFC 3339, in the future. --customer: the
      key belongs to that customer and is on its plan (--plan may then be left out; through the
      admin API only, not with --file).
  ${COMMANDS.list}
      Keys newest first, a page at a time (--limit, 1–500, default 50), as a table: names that
      start with --name (any case), of --plan, of --customer, whose shown prefix starts with
      --prefix. The next page: --after the cursor it prints; --all walks every page (with
      --json, one line per key).
  ${COMMANDS.show}
      One key.
  ${COMMANDS.update}
      Change a key's plan, limits, scopes, addresses, name or expiry. A change applies on the next
      request on every replica; counts carry over. A plan change drops the key's own limits unless
      the new plan has no windows; --plan-limits, --plan-scopes and --any-address drop its own.
      A lone key's credit terms: --refill N, its balance brought up to N each --refill-every
      (period, its UTC month, the default; or day); --credits-by-hand, a balance changed by
      top-ups only; --no-credits, it spends none whatever its plan says; --plan-credits drops its
      own (or its "none"): its plan's apply again. Its balance and ledger stay.
  ${COMMANDS.rotate}
      New secret, same id (one quota, one ban). The old secret works for --grace seconds
      (default ${DEFAULT_GRACE_SECONDS}, at most ${MAX_GRACE_SECONDS}; 0 ends it now), then gets 401. Prints the new key once.
  ${COMMANDS.usage}
      Live windows (limit, used, remaining, reset), ban and refusals; counts as no request.
  ${COMMANDS.history}
      The key's history as a chart: admitted and refused per day for --days days (default 7),
      per hour for 2 days or fewer, or per day for this calendar month so far (--period current)
      or the last one (--period previous), in UTC; the totals with units, limit and ban refusals, 403s.
  ${COMMANDS.top}
      The busiest keys of a window (default 24h, hours or days up to USAGE_HISTORY_DAYS) by
      admitted requests or --sort, --limit rows (default 20), and the totals per plan.
  ${COMMANDS.revoke}
      Revoke a key (both secrets, on every replica within 5 s).
  ${COMMANDS.unban}
      Lift a key's ban and forget its refusals.
  ${COMMANDS.bans}
      The bans in force on every key (GET /admin/bans): how many, and the --limit (1–500, default
      50) that end first, with the key's name and customer.
  ${COMMANDS.credits}
      A lone key's credits (a key of a customer spends its customer's: customers credits), as
      customers credits shows a customer's: the balance, this hour's spend and the next refill;
      --ledger its entries newest first; --add a top-up (--type grant or adjustment; only an
      adjustment may be negative) with --reason, made once per --idempotency-key: a second call
      with the same key prints "replayed: this top-up was already applied" (with --json,
      "replayed": true) and adds nothing.
  ${COMMANDS.invoice}
      A lone key's invoice preview under its plan's price (a key of a customer is billed as the
      customer: customers invoice), as customers invoice prints a customer's: this UTC month so
      far, or the whole one before with --previous; --csv prints the admin API's CSV file.
  ${COMMANDS.customers}
      Customers, the accounts above the keys: their plan and own limits are shared by all their
      keys; their billing month starts on --billing-anchor-day (1–28, default 1) at midnight in
      --time-zone (IANA, default UTC). list pages newest first (--after the cursor it prints, or
      --all for every page). delete is refused while the customer has live keys, unless
      --revoke-keys. usage: the customer's history (all its keys together) by its hour (default:
      the last 24), local day (the last 30) or billing period (the current one), in its own
      calendar; --from and --to take RFC 3339 or dates of that calendar; --csv prints the admin
      API's CSV for billing. Credit terms, on create and update: --refill N (each billing period,
      or each local day with --refill-every day) or --credits-by-hand; on update also --no-credits
      (none, whatever its plan says) or --plan-credits (its own dropped: its plan's apply again);
      its balance and ledger stay. credits --add: as the credits command's.
  ${COMMANDS.metering}
      The metering export (GET /admin/metering/events): closed hours' reports in the order they
      were appended, --limit (1–1000, default 100) after --after (the cursor it prints), or --all
      to the last; as a table (subject, hour, revision, units, delta), or with --json the page
      (one line), with --all one line per event. --format stripe-meter-events: the Stripe view.
  ${COMMANDS.webhooks}
      Webhook endpoints (Standard Webhooks): add one for a comma-separated list of events (prints
      its signing secret once), list them with their state, remove one, or queue a ping to it.
  ${COMMANDS.leaks}
      Leaked keys (docs/leaks.md): report a key found in a ticket or a log (the key, or its
      SHA-256 with --sha256 so it stays out of the shell history); it is notified, rotated with a
      grace or revoked as LEAK_RESPONSE says; list the proven leaks newest first (--limit 1–1000).

  --json   print JSON (one line) instead of text
  --file   work on an API_KEYS_FILE (hashes only) instead of calling the admin API;
           roll the gateway afterwards to load it; the file is checked against the plans of
           PLANS_FILE, as the gateway loading it does

The admin API is reached at ADMIN_URL (http://host:port or host:port), else at
ADMIN_HOST/ADMIN_PORT, else http://127.0.0.1:8081, with ADMIN_TOKEN.
A plaintext key is printed once, by create and rotate; it is never stored.`;

/** A command's own usage mistake: the message, then that command's usage line. */
export function usageError(command: string, message: string): UsageError {
  const line = COMMANDS[command];
  return new UsageError(line ? `${message}\nusage: npm run -s keys -- ${line}` : message);
}
