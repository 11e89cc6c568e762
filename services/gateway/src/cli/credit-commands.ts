import type { Static } from 'typebox';
import type { CreditBalanceSchema, CreditChangeViewSchema, CreditLedgerPageSchema } from '../api/credit-schemas.js';
import type { AdminClient } from './admin-client.js';
import type { Values } from './flags.js';
import { fields, jsonLine, printable, table, when } from './format.js';
import { type ListPage, pageQuery, printPages } from './pages.js';
import { usageError } from './usage.js';

/*
 * `keys customers credits ID` and `keys credits ID` (a lone key's): a balance, its ledger, a
 * top-up, through the admin API; one command for both, as the admin API has one contract.
 */

type Balance = Static<typeof CreditBalanceSchema>;
type LedgerPage = Static<typeof CreditLedgerPageSchema>;
type Change = Static<typeof CreditChangeViewSchema>;

/** Whose credits: a customer's (`customers credits`) or a lone key's (`credits`). */
type Owner = 'customers' | 'keys';

const COMMAND: Record<Owner, { command: string; noun: string; spender: string }> = {
  customers: { command: 'customers', noun: 'customer', spender: 'its keys spend' },
  keys: { command: 'credits', noun: 'key', spender: 'it spends' },
};

const creditsPath = (owner: Owner, id: string) => `/admin/${owner}/${encodeURIComponent(id)}/credits`;

function print(values: Values, json: unknown, text: string): void {
  process.stdout.write(values.json ? `${jsonLine(json)}\n` : text);
}

function balanceText(owner: Owner, b: Balance): string {
  const refill = b.credits?.refill;
  return fields([
    [COMMAND[owner].noun, printable(b.id)],
    ['balance', String(b.balance)],
    ['this hour', b.openHour ? `${b.openHour.spent} spent since ${when(b.openHour.start)}` : undefined],
    [
      'refill',
      refill ? `up to ${refill.amount} each ${refill.every}, next ${when(b.nextRefillAt ?? undefined)}` : undefined,
    ],
    ['credits', b.credits ? undefined : `none: ${COMMAND[owner].spender} no credits`],
  ]);
}

function ledgerTable(page: ListPage<LedgerPage['items'][number]>, more: boolean): string {
  if (page.items.length === 0) return 'no entries\n';
  const rows = page.items.map((e) => [
    e.id,
    e.type,
    String(e.amount),
    e.end ? `${e.at} to ${e.end}` : e.at,
    printable(e.reason ?? e.period ?? ''),
  ]);
  return table(['ID', 'TYPE', 'AMOUNT', 'AT', 'REASON'], rows) + (more ? `more: --after ${page.next}\n` : '');
}

/** --add N --reason TEXT [--type T]: the change as the admin API takes it. */
function changeFrom(owner: Owner, values: Values): { amount: number; reason: string; type?: string } {
  const { command } = COMMAND[owner];
  const amount = String(values.add);
  if (!/^-?[0-9]{1,13}$/.test(amount)) throw usageError(command, '--add must be a whole number of credits');
  if (typeof values.reason !== 'string' || values.reason === '') {
    throw usageError(command, `${owner === 'customers' ? 'customers credits' : 'credits'} --add needs --reason`);
  }
  const type = typeof values.type === 'string' ? { type: values.type } : {};
  return { amount: Number(amount), reason: values.reason, ...type };
}

/** `customers credits ID`, `credits ID`: the balance; with --ledger its entries, with --add a change. */
export async function credits(admin: AdminClient, owner: Owner, id: string, values: Values): Promise<void> {
  const path = creditsPath(owner, id);
  if (values.add !== undefined) {
    const key = values['idempotency-key'];
    const headers: Record<string, string> = typeof key === 'string' ? { 'idempotency-key': key } : {};
    const answer = await admin.exchange<Change>('POST', path, changeFrom(owner, values), headers);
    const made = answer.data;
    // The same Idempotency-Key again: the admin API answers the first change again and adds nothing.
    const replayed = answer.headers.get('idempotent-replayed') === 'true';
    const whose = printable(made.customerId ?? made.keyId ?? id);
    const replay = replayed
      ? `replayed: this ${made.type.replace('topup', 'top-up')} was already applied; nothing was added\n`
      : '';
    return print(
      values,
      { ...made, replayed },
      `${made.type} of ${made.amount} for ${whose} (ref ${made.ref})\n${replay}`,
    );
  }
  if (values.ledger) {
    const query = pageQuery(COMMAND[owner].command, values, []);
    return printPages(admin, `${path}/ledger`, query, values, ledgerTable, (err) => {
      throw err;
    });
  }
  const balance = await admin.request<Balance>('GET', path);
  print(values, balance, balanceText(owner, balance));
}
