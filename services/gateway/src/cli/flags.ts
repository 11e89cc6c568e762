import { isPlainText, PLAIN_TEXT_RULE } from '@animal-store/common/plain-text.js';
import { type CreditTerms, type CreditTermsChange, MAX_CREDITS, PLAN_CREDITS } from '../credits/credit-terms.js';
import {
  checkedExpiry,
  type FieldNames,
  type KeyRequest,
  type KeyUpdate,
  MAX_GRACE_SECONDS,
} from '../keys/key-operations.js';
import { type LimitField, WINDOWS } from '../limits/windows.js';
import { JSON_NAMES, type Limits } from '../plans/plans.js';
import { usageError } from './usage.js';

/* The command line's options as the key operations take them: each flag's shape checked here. */

export type Values = Record<string, string | boolean | string[] | undefined>;

/** `perMinute` is `--per-minute` (limits/windows.ts). */
const limitFlag = (field: LimitField): string => WINDOWS.find((w) => w.field === field)?.flag ?? field;

/** `--per-second, --per-minute … or --per-month`: every window's flag. */
const ANY_LIMIT_FLAG = WINDOWS.map((w) => w.flag)
  .join(', ')
  .replace(/, (?!.*, )/, ' or ');

/** The CLI speaks in its own flags, not the admin API's JSON fields. */
export const FLAG_NAMES: FieldNames = {
  limits: {
    plan: '--plan',
    limits: `limits (${ANY_LIMIT_FLAG})`,
    field: limitFlag,
  },
  expiresAt: '--expires-at',
  scopes: '--scopes',
  allowedCidrs: '--allow-cidr',
};

/**
 * A refusal of the admin API in the CLI's words: the key rules name the fields as the API's JSON
 * has them (`limits.perMinute`, `expiresAt`), and a CLI user typed flags. Each message starts with
 * the field it is about; the limit fields and the camel-case names are replaced wherever they are.
 */
export function inFlagWords(message: string): string {
  const anywhere: Array<[string, string]> = [
    [JSON_NAMES.limits, FLAG_NAMES.limits.limits],
    ...WINDOWS.map((w): [string, string] => [JSON_NAMES.field(w.field), w.flag]),
    ['expiresAt', FLAG_NAMES.expiresAt],
    ['allowedCidrs', FLAG_NAMES.allowedCidrs],
    ['customerId', '--customer'],
  ];
  let out = message;
  for (const [api, flag] of anywhere) out = out.replaceAll(api, flag);
  const atStart: Array<[string, string]> = [
    [JSON_NAMES.plan, FLAG_NAMES.limits.plan],
    ['scopes', FLAG_NAMES.scopes],
  ];
  for (const [api, flag] of atStart) {
    if (out.startsWith(`${api} `)) out = `${flag}${out.slice(api.length)}`;
  }
  return out;
}

/** Every flag that changes a key's limits, scopes or addresses. */
const LIMIT_FLAGS = WINDOWS.map((w) => w.flag.slice(2));

function positiveInt(command: string, name: string, raw: unknown): number | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !/^[1-9][0-9]*$/.test(raw)) {
    throw usageError(command, `--${name} must be a positive integer`);
  }
  return Number(raw);
}

/** The --per-… flags given, as limits of the key's own; null for --plan-limits. */
export function limitsFrom(command: string, values: Values): Limits | null | undefined {
  const limits: Limits = {};
  for (const { field, flag } of WINDOWS) {
    const n = positiveInt(command, flag.slice(2), values[flag.slice(2)]);
    if (n !== undefined) limits[field] = n;
  }
  const given = Object.keys(limits).length > 0;
  if (values['plan-limits']) {
    if (given) throw usageError(command, 'give --per-… limits or --plan-limits, not both');
    return null;
  }
  return given ? limits : undefined;
}

/** --scopes a,b as a list; null for --plan-scopes. */
function scopesFrom(command: string, values: Values): string[] | null | undefined {
  if (values['plan-scopes']) {
    if (values.scopes !== undefined) throw usageError(command, 'give --scopes or --plan-scopes, not both');
    return null;
  }
  if (typeof values.scopes !== 'string') return undefined;
  return values.scopes
    .split(',')
    .map((scope) => scope.trim())
    .filter(Boolean);
}

/** Each --allow-cidr; null for --any-address. */
function cidrsFrom(command: string, values: Values): string[] | null | undefined {
  const given = values['allow-cidr'];
  if (values['any-address']) {
    if (given !== undefined) throw usageError(command, 'give --allow-cidr or --any-address, not both');
    return null;
  }
  return Array.isArray(given) ? given : undefined;
}

/** --name as the admin API takes a name: text people read, never terminal controls. */
function nameFrom(command: string, values: Values): string | undefined {
  const name = values.name;
  if (typeof name !== 'string') return undefined;
  if (!isPlainText(name)) throw usageError(command, `--name ${PLAIN_TEXT_RULE}`);
  return name;
}

/** --expires-at as given, null for --no-expiry, undefined for neither. */
function expiryFrom(command: string, values: Values): string | null | undefined {
  if (values['no-expiry'] && values['expires-at'] !== undefined) {
    throw usageError(command, 'give --expires-at or --no-expiry, not both');
  }
  if (values['no-expiry']) return null;
  const expiresAt = values['expires-at'];
  return typeof expiresAt === 'string' ? expiresAt : undefined;
}

/** What `create` asks for; the key rules (checkNewKey) decide on it. */
export function createRequest(values: Values): Omit<KeyRequest, 'plan'> & { plan?: string; customerId?: string } {
  const plan = values.plan;
  const customerId = values.customer;
  if (customerId !== undefined && (typeof customerId !== 'string' || customerId.length === 0)) {
    throw usageError('create', '--customer needs a customer id');
  }
  if (typeof plan !== 'string' && customerId === undefined)
    throw usageError('create', 'create needs --plan (or --customer)');
  const credits = CREDIT_CHOICES.find((flag) => values[flag] !== undefined);
  if (credits)
    throw usageError('create', `--${credits}: a key is made on its plan's credit terms; change them with update`);
  const limits = limitsFrom('create', values);
  const scopes = scopesFrom('create', values);
  const allowedCidrs = cidrsFrom('create', values);
  const expiresAt = expiryFrom('create', values);
  const name = nameFrom('create', values);
  return {
    // Without --plan, --customer is given: the admin API puts the key on its customer's plan.
    ...(typeof plan === 'string' ? { plan } : {}),
    ...(typeof customerId === 'string' ? { customerId } : {}),
    ...(limits ? { limits } : {}),
    ...(scopes ? { scopes } : {}),
    ...(allowedCidrs ? { allowedCidrs } : {}),
    ...(typeof expiresAt === 'string' ? { expiresAt } : {}),
    ...(name !== undefined ? { name } : {}),
  };
}

/**
 * What `update` asks to change. Its expiry is checked here, also for the admin API: a bad one is
 * a mistake on the command line, refused before anything is sent.
 */
export function updateRequest(values: Values): KeyUpdate {
  const flags = [
    'plan',
    ...LIMIT_FLAGS,
    'plan-limits',
    'scopes',
    'plan-scopes',
    'allow-cidr',
    'any-address',
    'name',
    'expires-at',
    'no-expiry',
    ...CREDIT_CHOICES,
    'refill-every',
  ];
  if (!flags.some((f) => values[f] !== undefined)) {
    throw usageError(
      'update',
      'nothing to change: give --plan, --per-… limits or --plan-limits, --scopes or --plan-scopes, --allow-cidr or --any-address, --name, --expires-at or --no-expiry, or credit terms (--refill N, --credits-by-hand, --no-credits, --plan-credits)',
    );
  }
  const plan = values.plan;
  if (plan !== undefined && typeof plan !== 'string') throw usageError('update', '--plan needs a plan name');
  const limits = limitsFrom('update', values);
  const scopes = scopesFrom('update', values);
  const allowedCidrs = cidrsFrom('update', values);
  const expiresAt = expiryFrom('update', values);
  const name = nameFrom('update', values);
  const credits = creditsFrom('update', values, true);
  return {
    ...(plan !== undefined ? { plan } : {}),
    ...(limits !== undefined ? { limits } : {}),
    ...(scopes !== undefined ? { scopes } : {}),
    ...(allowedCidrs !== undefined ? { allowedCidrs } : {}),
    ...(name !== undefined ? { name } : {}),
    ...(expiresAt === null ? { expiresAt: null } : {}),
    ...(typeof expiresAt === 'string' ? { expiresAt: checkedExpiry(expiresAt, Date.now(), FLAG_NAMES) } : {}),
    // A lone key's credit terms: its own, none (null), or its plan's again (`"credits": "plan"`).
    ...(credits !== undefined ? { credits } : {}),
  };
}

/** The flags that choose credit terms, each alone: terms of its own, none, or its plan's. */
const CREDIT_CHOICES = ['refill', 'credits-by-hand', 'no-credits', 'plan-credits'];

/**
 * The credit terms the flags give, as the admin API's `credits` takes them: `--refill N` (with
 * `--refill-every period|day`, default period) or `--credits-by-hand` (a balance topped up by
 * hand only) for terms of its own; on a change also `--no-credits` (null: none, whatever its plan
 * says) or `--plan-credits` (its own dropped). Undefined when none is given.
 */
export function creditsFrom(command: string, values: Values, change: true): CreditTermsChange | undefined;
export function creditsFrom(command: string, values: Values, change: false): CreditTerms | undefined;
export function creditsFrom(command: string, values: Values, change: boolean): CreditTermsChange | undefined {
  const given = CREDIT_CHOICES.filter((flag) => values[flag] !== undefined);
  if (given.length > 1) {
    throw usageError(
      command,
      `give one of --refill, --credits-by-hand, --no-credits or --plan-credits, not ${given.map((f) => `--${f}`).join(' and ')}`,
    );
  }
  const every = values['refill-every'];
  if (every !== undefined && values.refill === undefined) throw usageError(command, '--refill-every needs --refill N');
  if (!change && (values['no-credits'] || values['plan-credits'])) {
    throw usageError(
      command,
      `--${given[0]} changes terms: give it to update (create takes --refill or --credits-by-hand)`,
    );
  }
  if (values['no-credits']) return null;
  if (values['plan-credits']) return PLAN_CREDITS;
  if (values['credits-by-hand']) return {};
  const amount = values.refill;
  if (amount === undefined) return undefined;
  if (typeof amount !== 'string' || !/^[1-9][0-9]{0,12}$/.test(amount) || Number(amount) > MAX_CREDITS) {
    throw usageError(command, `--refill must be a whole number of credits from 1 to ${MAX_CREDITS}`);
  }
  if (every !== undefined && every !== 'period' && every !== 'day') {
    throw usageError(command, '--refill-every must be period (each billing period) or day');
  }
  return { refill: { amount: Number(amount), every: every ?? 'period' } };
}

/** --grace in seconds, or undefined for the default. */
export function graceFrom(values: Values): number | undefined {
  const raw = values.grace;
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !/^(0|[1-9][0-9]*)$/.test(raw) || Number(raw) > MAX_GRACE_SECONDS) {
    throw usageError('rotate', `--grace must be a whole number of seconds from 0 to ${MAX_GRACE_SECONDS}`);
  }
  return Number(raw);
}

/** A whole number option from 1 to `max` (--days, --limit). */
export function boundedInt(command: string, flag: string, raw: Values[string], max: number): number {
  const n = positiveInt(command, flag.slice(2), raw);
  if (n === undefined || n > max) throw usageError(command, `${flag} must be a whole number from 1 to ${max}`);
  return n;
}
