import type { Static } from 'typebox';
import type { BanListSchema, KeyViewSchema, UsageSchema } from '../api/schemas.js';
import type { CreditTerms } from '../credits/credit-terms.js';
import { WINDOWS } from '../limits/windows.js';
import type { Limits } from '../plans/plans.js';
import { fields, table, when } from './format.js';

/* Keys and their usage as text for people. */

export type KeyView = Static<typeof KeyViewSchema>;
export type Usage = Static<typeof UsageSchema>;

/** `60/min, 1000/day`: each window a key has, shortest first. */
export function limitsText(limits: Limits): string {
  return WINDOWS.filter((w) => limits[w.field] !== undefined)
    .map((w) => `${limits[w.field]}/${w.unit}`)
    .join(', ');
}

/** `up to 500 each period`: credit terms in force, or what there is without them. */
export function creditTermsText(terms: CreditTerms | undefined): string {
  if (!terms) return 'none';
  return terms.refill ? `up to ${terms.refill.amount} each ${terms.refill.every}` : 'no refill';
}

function status(k: KeyView, now: number): string {
  if (k.revokedAt) return 'revoked';
  if (k.expiresAt && Date.parse(k.expiresAt) <= now) return 'expired';
  if (k.bannedUntil) return `banned until ${when(k.bannedUntil)}`;
  return 'active';
}

export function showKey(k: KeyView): string {
  const previousLive = k.previousKeyExpiresAt && Date.parse(k.previousKeyExpiresAt) > Date.now();
  return fields([
    ['id', k.id],
    ['name', k.name],
    ['plan', k.plan],
    ['limits', limitsText(k.limits)],
    ['scopes', k.scopes.join(', ') || 'none'],
    ['addresses', k.allowedCidrs ? k.allowedCidrs.join(', ') : 'any'],
    // A key of a customer spends its customer's credits (customers show).
    ['credits', k.customerId ? undefined : creditTermsText(k.credits)],
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

export function keysTable(keys: KeyView[]): string {
  if (keys.length === 0) return 'no keys\n';
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
  return table(['ID', 'PLAN', 'LIMITS', 'STATUS', 'EXPIRES', 'SOURCE', 'NAME'], rows);
}

export type BanList = Static<typeof BanListSchema>;

/** The bans in force, soonest end first; the count is of all of them, the rows only the first. */
export function bansTable({ count, items }: BanList): string {
  if (count === 0) return 'no key is banned\n';
  const rows = items.map((b) => [b.id, when(b.bannedUntil) ?? '-', b.customerId ?? '-', b.name]);
  const shown = items.length < count ? `, the ${items.length} that end first shown` : '';
  return `${table(['ID', 'BANNED UNTIL', 'CUSTOMER', 'NAME'], rows)}${count} banned now${shown}\n`;
}

/** The refusals counted toward a ban, said as they matter in the key's state. */
function refusalsText(u: Usage): string {
  if (u.ban)
    return u.refusals === 0 ? 'none (counting starts again when the ban ends)' : `${u.refusals} toward the next ban`;
  return u.refusals === 0 ? 'none toward a ban' : `${u.refusals} toward a ban`;
}

export function showUsage(u: Usage): string {
  const rows = WINDOWS.flatMap(({ name }) => {
    const w = u.windows[name];
    return w ? [[name, String(w.limit), String(w.used), String(w.remaining), when(w.resetAt) ?? 'not started']] : [];
  });
  return (
    `${u.id} (${u.plan})\n` +
    table(['WINDOW', 'LIMIT', 'USED', 'REMAINING', 'RESETS'], rows) +
    fields([
      ['ban', u.ban ? `until ${when(u.ban.until)}` : 'none'],
      ['refusals', refusalsText(u)],
    ])
  );
}
