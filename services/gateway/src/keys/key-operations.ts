import {
  type CreditTermsChange,
  creditTermsProblem,
  PLAN_CREDITS,
  storedCreditTerms,
} from '../credits/credit-terms.js';
import {
  type LimitNames,
  type Limits,
  limitsAfterChange,
  type Plan,
  type PlanBook,
  planProblem,
  type Scope,
  scopesProblem,
} from '../plans/plans.js';
import { parseCidrs } from './cidrs.js';
import { type NewKey, newSecret } from './create-key.js';
import { parseExpiry, previousSecretEnds } from './expiry.js';
import { DuplicateKeyError, type KeyChanges, type KeyRecord, type KeyStore, type Rotation } from './key-store.js';

/*
 * The rules for making and changing keys, whatever holds them: the admin API applies them to the
 * key store, the keys CLI's --file to an API_KEYS_FILE (FileKeyStore). Each caller checks the shape
 * of what it is given first (a JSON schema, the CLI's flags); what needs the plans in force, the
 * clock or the key as it stands is decided here.
 */

/** A request the key rules refuse: the admin API answers it 400, the CLI exits 2 with it. */
export class KeyRuleError extends Error {}

/** How a caller names the fields in its messages; without it, as the admin API's JSON fields. */
export interface FieldNames {
  limits: LimitNames;
  expiresAt: string;
  scopes: string;
  allowedCidrs: string;
}

export const DEFAULT_GRACE_SECONDS = 86_400;
export const MAX_GRACE_SECONDS = 604_800;

/** RFC 3339 text as the ISO moment a key ends, which must lie after `now`. */
export function checkedExpiry(value: string, now: number, names?: FieldNames): string {
  const parsed = parseExpiry(value, names?.expiresAt ?? 'expiresAt', now);
  if (parsed.problem !== undefined) throw new KeyRuleError(parsed.problem);
  return parsed.expiresAt;
}

/** Known scopes, each once. */
function checkedScopes(scopes: readonly string[], names?: FieldNames): Scope[] {
  const problem = scopesProblem(scopes, names?.scopes ?? 'scopes');
  if (problem) throw new KeyRuleError(problem);
  return [...scopes] as Scope[];
}

/** Addresses and CIDRs, normalised (a bare address is its /32 or /128). */
function checkedCidrs(cidrs: readonly string[], names?: FieldNames): string[] {
  const parsed = parseCidrs(cidrs, names?.allowedCidrs ?? 'allowedCidrs');
  if ('problem' in parsed) throw new KeyRuleError(parsed.problem);
  return parsed.cidrs;
}

/**
 * Credit terms for a key: only a key standing for itself spends credits of its own (a key of a
 * customer spends its customer's). null (none) and 'plan' (its own dropped) are always accepted.
 */
function checkedCredits(terms: CreditTermsChange, customerId: string | null | undefined): CreditTermsChange {
  if (terms === null || terms === PLAN_CREDITS) return terms;
  if (customerId) {
    throw new KeyRuleError(
      `credits: the key belongs to customer ${customerId} and spends its credits; set them on the customer`,
    );
  }
  const problem = creditTermsProblem(terms);
  if (problem) throw new KeyRuleError(problem);
  return storedCreditTerms(terms);
}

/** What a caller asks of a new key, its expiry as given. */
export interface KeyRequest {
  plan: string;
  name?: string;
  limits?: Limits;
  scopes?: readonly string[];
  allowedCidrs?: readonly string[];
  expiresAt?: string;
}

/**
 * The key a request may have: a plan in force, limits of its own that fit it, known scopes,
 * allowed addresses, an expiry to come.
 */
export function checkNewKey(plans: PlanBook, request: KeyRequest, now: number, names?: FieldNames): NewKey {
  const problem = planProblem(plans, request.plan, request.limits, names?.limits);
  if (problem) throw new KeyRuleError(problem);
  return {
    // planProblem has just checked it is one.
    plan: request.plan as Plan,
    name: request.name,
    limits: request.limits,
    scopes: request.scopes === undefined ? undefined : checkedScopes(request.scopes, names),
    allowedCidrs: request.allowedCidrs === undefined ? undefined : checkedCidrs(request.allowedCidrs, names),
    expiresAt: request.expiresAt === undefined ? undefined : checkedExpiry(request.expiresAt, now, names),
  };
}

/**
 * Stores a record made by createKey, again if need be: a record the store already holds with the
 * same id and secret is taken as stored (a retry of a create that reached the store).
 */
export async function insertOnce(store: Pick<KeyStore, 'insert' | 'get'>, record: KeyRecord): Promise<void> {
  try {
    await store.insert(record);
  } catch (err) {
    if (!(err instanceof DuplicateKeyError) || (await store.get(record.id))?.sha256 !== record.sha256) throw err;
  }
}

/**
 * What a caller asks to change in a key. `null` returns a field to its default: `limits` to the
 * plan's, `scopes` to the plan's, `allowedCidrs` to any address, `expiresAt` to none.
 */
export interface KeyUpdate {
  plan?: Plan;
  limits?: Limits | null;
  scopes?: readonly string[] | null;
  allowedCidrs?: readonly string[] | null;
  name?: string;
  expiresAt?: string | null;
  /** Checked by the caller (the customer exists, the key fits it). */
  customerId?: string | null;
  /** A lone key's own credit terms; null: none, even if its plan has some; 'plan': its plan's again. */
  credits?: CreditTermsChange;
}

/**
 * The change an update makes to the key as it stands. Its own limits change only when new ones
 * are given, or dropped (null), or the key moves to another plan with windows (limitsAfterChange):
 * a rename, an expiry, scopes or addresses leave them as they are.
 */
function changesFor(
  plans: PlanBook,
  current: KeyRecord,
  update: KeyUpdate,
  now: number,
  names?: FieldNames,
): KeyChanges {
  const plan = update.plan ?? current.plan;
  const limits =
    update.limits === null ? undefined : limitsAfterChange(plans, current.plan, plan, update.limits, current.limits);
  const problem = planProblem(plans, plan, limits, names?.limits);
  if (problem) throw new KeyRuleError(problem);
  const { scopes, allowedCidrs } = update;
  return {
    ...(update.plan !== undefined ? { plan: update.plan } : {}),
    ...(update.name !== undefined ? { name: update.name } : {}),
    ...(limits === current.limits ? {} : limits ? { limits } : { limits: null }),
    ...(scopes === null ? { scopes: null } : scopes ? { scopes: checkedScopes(scopes, names) } : {}),
    ...(allowedCidrs === null
      ? { allowedCidrs: null }
      : allowedCidrs
        ? { allowedCidrs: checkedCidrs(allowedCidrs, names) }
        : {}),
    ...(update.expiresAt === null ? { expiresAt: null } : {}),
    ...(typeof update.expiresAt === 'string' ? { expiresAt: checkedExpiry(update.expiresAt, now, names) } : {}),
    ...(update.customerId !== undefined ? { customerId: update.customerId } : {}),
    ...(update.credits !== undefined
      ? { credits: checkedCredits(update.credits, update.customerId ?? current.customerId) }
      : {}),
  };
}

/** Applies an update to a live key; null when the store no longer holds it live. */
export async function updateKey(
  plans: PlanBook,
  store: Pick<KeyStore, 'update'>,
  current: KeyRecord,
  update: KeyUpdate,
  now: number,
  names?: FieldNames,
): Promise<KeyRecord | null> {
  return store.update(current.id, changesFor(plans, current, update, now, names), new Date(now));
}

export interface RotatedKey {
  key: string;
  record: KeyRecord;
  previousKeyExpiresAt: string;
}

/**
 * A rotation of a live key, drawn but not made: its new secret, and the rotation that replaces
 * the current secret with it, which keeps working for the grace period, never past the key's own
 * expiry.
 */
export function planRotation(
  current: KeyRecord,
  now: number,
  graceSeconds: number = DEFAULT_GRACE_SECONDS,
): { key: string; rotation: Rotation & { from: string } } {
  const secret = newSecret();
  return {
    key: secret.key,
    rotation: {
      sha256: secret.sha256,
      prefix: secret.prefix,
      previousExpiresAt: previousSecretEnds(current.expiresAt, now, graceSeconds),
      from: current.sha256,
    },
  };
}

/**
 * Makes a planned rotation, again if need be: a key that already has the planned secret was
 * rotated by this plan before (a retry). Null when the store no longer holds the key live, or
 * another rotation replaced the secret the plan started from.
 */
export async function applyRotation(
  store: Pick<KeyStore, 'rotate' | 'get'>,
  id: string,
  rotation: Rotation,
  at: number,
): Promise<KeyRecord | null> {
  const rotated = await store.rotate(id, rotation, new Date(at));
  if (rotated) return rotated;
  const current = await store.get(id);
  return current && !current.revokedAt && current.sha256 === rotation.sha256 ? current : null;
}

/** Gives a live key a new secret (planRotation, applyRotation). Null when it cannot be made. */
export async function rotateKey(
  store: Pick<KeyStore, 'rotate' | 'get'>,
  current: KeyRecord,
  now: number,
  graceSeconds: number = DEFAULT_GRACE_SECONDS,
): Promise<RotatedKey | null> {
  const { key, rotation } = planRotation(current, now, graceSeconds);
  const record = await applyRotation(store, current.id, rotation, now);
  return record && { key, record, previousKeyExpiresAt: rotation.previousExpiresAt };
}
