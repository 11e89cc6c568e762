import type { Static } from 'typebox';
import type { CustomerViewSchema } from '../api/customer-schemas.js';
import { customerView } from '../api/customer-view.js';
import type { HistorySchema } from '../api/history-schemas.js';
import { type CustomerRequest, CustomerRuleError, type CustomerUpdate } from '../customers/customer-operations.js';
import { toCsv } from '../usage/reports.js';
import { AdminApiError, AdminClient } from './admin-client.js';
import { credits } from './credit-commands.js';
import { createCustomerInFile, localPlans } from './file-backend.js';
import { creditsFrom, inFlagWords, limitsFrom, type Values } from './flags.js';
import { fields, jsonLine, printable, table, when } from './format.js';
import { invoice } from './invoice-commands.js';
import { creditTermsText, limitsText } from './key-text.js';
import { type ListPage, pageQuery, printPages } from './pages.js';
import { usageError } from './usage.js';

/* `keys customers create|list|show|update|delete`: customers through the admin API. */

type CustomerView = Static<typeof CustomerViewSchema>;
type CustomerHistory = Static<typeof HistorySchema>;

const customerPath = (id: string) => `/admin/customers/${encodeURIComponent(id)}`;

function print(values: Values, json: unknown, text: string): void {
  process.stdout.write(values.json ? `${jsonLine(json)}\n` : text);
}

/** The admin API's field names as the flags that were typed. */
function inCustomerFlags(message: string): string {
  return inFlagWords(message)
    .replaceAll('billing.anchorDay', '--billing-anchor-day')
    .replaceAll('billing.timeZone', '--time-zone')
    .replaceAll('externalId', '--external-id');
}

function refused(err: unknown): never {
  if (err instanceof AdminApiError && err.status === 400)
    throw usageError('customers', inCustomerFlags(err.apiMessage));
  throw err;
}

function text(values: Values, flag: string): string | undefined {
  const value = values[flag];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length === 0) throw usageError('customers', `--${flag} needs a value`);
  return value;
}

/** --billing-anchor-day and --time-zone as the admin API's `billing`; checked there (1–28, a known zone). */
function billingFrom(values: Values): { anchorDay?: number; timeZone?: string } | undefined {
  const day = text(values, 'billing-anchor-day');
  const timeZone = text(values, 'time-zone');
  if (day !== undefined && !/^[0-9]{1,2}$/.test(day)) {
    throw usageError('customers', '--billing-anchor-day must be a whole number from 1 to 28');
  }
  if (day === undefined && timeZone === undefined) return undefined;
  return { ...(day !== undefined ? { anchorDay: Number(day) } : {}), ...(timeZone !== undefined ? { timeZone } : {}) };
}

/** The fields create and update share, as given on the command line. */
function customerFields(values: Values): CustomerUpdate {
  const limits = limitsFrom('customers', values);
  const billing = billingFrom(values);
  const externalId = text(values, 'external-id');
  const name = text(values, 'name');
  const plan = text(values, 'plan');
  return {
    ...(name !== undefined ? { name } : {}),
    ...(plan !== undefined ? { plan } : {}),
    ...(limits !== undefined ? { limits } : {}),
    ...(billing !== undefined ? { billing } : {}),
    ...(externalId !== undefined ? { externalId } : {}),
  };
}

function showCustomer(c: CustomerView): string {
  return fields([
    ['id', printable(c.id)],
    ['name', printable(c.name)],
    ['plan', c.plan],
    ['limits', `${limitsText(c.limits)}${c.ownLimits ? ' (own)' : ''}`],
    ['billing', `from day ${c.billing.anchorDay}, ${c.billing.timeZone}`],
    ['credits', creditTermsText(c.credits)],
    ['period', `${when(c.currentPeriod.start)} to ${when(c.currentPeriod.end)}`],
    ['external id', c.externalId === undefined ? undefined : printable(c.externalId)],
    ['created', when(c.createdAt)],
    ['updated', when(c.updatedAt)],
  ]);
}

function customersTable(page: ListPage<CustomerView>, more: boolean): string {
  if (page.items.length === 0) return 'no customers\n';
  const rows = page.items.map((c) => [
    c.id,
    printable(c.name),
    c.plan,
    `${c.billing.anchorDay} ${c.billing.timeZone}`,
    printable(c.externalId ?? ''),
  ]);
  return table(['ID', 'NAME', 'PLAN', 'BILLING', 'EXTERNAL ID'], rows) + (more ? `more: --after ${page.next}\n` : '');
}

async function list(admin: AdminClient, values: Values): Promise<void> {
  const query = pageQuery('customers', values, [
    ['name', 'name'],
    ['plan', 'plan'],
    ['external-id', 'externalId'],
  ]);
  await printPages(admin, '/admin/customers', query, values, customersTable, refused);
}

/** `customers create`: through the admin API, or with --file into an API_KEYS_FILE. */
async function create(values: Values): Promise<void> {
  // The flags set no metadata; limits and externalId are never null here (no --plan-limits on create).
  const { name, plan, limits, externalId, billing } = customerFields(values);
  const credits = creditsFrom('customers', values, false);
  if (name === undefined || plan === undefined) {
    throw usageError('customers', 'customers create needs --name and --plan');
  }
  const request: CustomerRequest = {
    ...(billing ? { billing } : {}),
    name,
    plan,
    ...(limits ? { limits } : {}),
    ...(typeof externalId === 'string' ? { externalId } : {}),
    ...(credits !== undefined ? { credits } : {}),
  };
  let made: CustomerView;
  if (typeof values.file === 'string') {
    const plans = localPlans();
    const record = await createCustomerInFile(values.file, plans, request).catch((err: unknown) => {
      if (err instanceof CustomerRuleError) throw usageError('customers', inCustomerFlags(err.message));
      throw err;
    });
    made = customerView({ plans, now: Date.now }, record);
  } else {
    made = await AdminClient.fromEnv(process.env)
      .request<CustomerView>('POST', '/admin/customers', request)
      .catch(refused);
  }
  const rolled = typeof values.file === 'string' ? `roll the gateway to load ${values.file}\n` : '';
  print(values, made, `created ${made.id}\n${showCustomer(made)}${rolled}`);
}

/** A customer's history as a table: a row per step (its days and periods vary in length), then totals. */
function historyTable(h: CustomerHistory): string {
  const rows = h.series.map((s) => [
    s.start,
    s.end,
    String(s.admitted),
    String(s.refused),
    String(s.forbidden),
    String(s.units),
    String(s.upstreamFailed),
  ]);
  const t = h.totals;
  return (
    `${printable(h.id)} (${printable(h.name)}): by ${h.granularity}, ${h.billing.timeZone}, billing from day ${h.billing.anchorDay}
` +
    table(['START', 'END', 'ADMITTED', 'REFUSED', 'FORBIDDEN', 'UNITS', 'FAILED UPSTREAM'], rows) +
    `total: ${t.admitted} admitted (${t.units} units), ${t.refused} refused, ${t.forbidden} forbidden` +
    `${t.upstreamFailed ? `, ${t.upstreamFailed} failed upstream (not billed)` : ''}\n`
  );
}

/** `customers usage ID`: the customer's history, in its calendar, from the admin API. */
async function usage(admin: AdminClient, id: string, values: Values): Promise<void> {
  const query = new URLSearchParams();
  for (const flag of ['granularity', 'period', 'from', 'to'] as const) {
    const value = text(values, flag);
    if (value !== undefined) query.set(flag, value);
  }
  const found = await admin
    .request<CustomerHistory>('GET', `${customerPath(id)}/usage/history?${query}`)
    .catch(refused);
  if (values.csv) {
    process.stdout.write(toCsv(found.series));
    return;
  }
  print(values, found, historyTable(found));
}

/** `customers <action> [ID]`: the action's own arguments are checked here. */
export async function customers(args: string[], values: Values): Promise<void> {
  const [action, id, ...extra] = args;
  if (extra.length > 0) throw usageError('customers', `unexpected argument "${extra[0]}"`);
  if (typeof values.file === 'string' && action !== 'create') {
    throw usageError('customers', `customers ${action} works through the admin API; with --file, only create`);
  }
  if (action === 'create') return create(values);
  const admin = AdminClient.fromEnv(process.env);
  const need = (): string => {
    if (!id) throw usageError('customers', `customers ${action} needs a customer id`);
    return id;
  };
  switch (action) {
    case 'list':
      return list(admin, values);
    case 'show': {
      const found = await admin.request<CustomerView>('GET', customerPath(need()));
      return print(values, found, showCustomer(found));
    }
    case 'update': {
      const body = customerFields(values);
      if (values['plan-limits']) body.limits = null;
      const credits = creditsFrom('customers', values, true);
      if (credits !== undefined) body.credits = credits;
      if (Object.keys(body).length === 0) {
        throw usageError(
          'customers',
          'nothing to change: give --name, --plan, --per-… limits or --plan-limits, --billing-anchor-day, --time-zone, --external-id or credit terms (--refill N, --credits-by-hand, --no-credits, --plan-credits)',
        );
      }
      const updated = await admin.request<CustomerView>('PATCH', customerPath(need()), body).catch(refused);
      return print(values, updated, showCustomer(updated));
    }
    case 'usage':
      return usage(admin, need(), values);
    case 'credits':
      return credits(admin, 'customers', need(), values);
    case 'invoice':
      return invoice(admin, 'customers', need(), values);
    case 'delete': {
      const target = need();
      await admin.request('DELETE', `${customerPath(target)}${values['revoke-keys'] ? '?revokeKeys=true' : ''}`);
      return print(values, { id: target, deleted: true }, `deleted ${printable(target)}\n`);
    }
    default:
      throw usageError('customers', action ? `unknown customers action "${action}"` : 'customers needs an action');
  }
}
