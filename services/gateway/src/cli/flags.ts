import { isPlainText, PLAIN_TEXT_RULE } from '@animal-store/common/validation.js';
import {
  checkedExpiry,
  type FieldNames,
  type KeyRequest,
  type KeyUpdate,
  MAX_GRACE_SECONDS,
} from '../keys/key-operations.js';
import { isPlan, type Limits, PLANS } from '../plans.js';
import { usageError } from './usage.js';

/* The command line's options as the key operations take them: each flag's shape checked here. */

export type Values = Record<string, string | boolean | undefined>;

/** The CLI speaks in its own flags, not the admin API's JSON fields. */
export const FLAG_NAMES: FieldNames = {
  limits: {
    plan: '--plan',
    limits: '--per-minute and --per-day',
    perMinute: '--per-minute',
    perDay: '--per-day',
  },
  expiresAt: '--expires-at',
};

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
export function createRequest(values: Values): KeyRequest {
  const plan = values.plan;
  if (typeof plan !== 'string') throw usageError('create', 'create needs --plan');
  const limits = limitsFrom('create', values);
  const expiresAt = expiryFrom('create', values);
  const name = nameFrom('create', values);
  return {
    plan,
    ...(limits ? { limits } : {}),
    ...(typeof expiresAt === 'string' ? { expiresAt } : {}),
    ...(name !== undefined ? { name } : {}),
  };
}

/**
 * What `update` asks to change. Its expiry is checked here, also for the admin API: a bad one is
 * a mistake on the command line, refused before anything is sent.
 */
export function updateRequest(values: Values): KeyUpdate {
  const given = ['plan', 'per-minute', 'per-day', 'name', 'expires-at', 'no-expiry'].filter(
    (f) => values[f] !== undefined,
  );
  if (given.length === 0) {
    throw usageError(
      'update',
      'nothing to change: give --plan, --per-minute/--per-day, --name, --expires-at or --no-expiry',
    );
  }
  const plan = values.plan;
  if (plan !== undefined && !isPlan(plan)) {
    throw usageError('update', `${FLAG_NAMES.limits.plan} must be one of ${PLANS.join(', ')}`);
  }
  const limits = limitsFrom('update', values);
  const expiresAt = expiryFrom('update', values);
  const name = nameFrom('update', values);
  return {
    ...(plan !== undefined ? { plan } : {}),
    ...(limits ? { limits } : {}),
    ...(name !== undefined ? { name } : {}),
    ...(expiresAt === null ? { expiresAt: null } : {}),
    ...(typeof expiresAt === 'string' ? { expiresAt: checkedExpiry(expiresAt, Date.now(), FLAG_NAMES) } : {}),
  };
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
