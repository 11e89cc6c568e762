import { type CreditTerms, type CreditTermsChange, PLAN_CREDITS } from '../credits/credit-terms.js';
import type { Page, PageRequest } from '../paging/page.js';
import type { Limits, Plan, Scope } from '../plans/plans.js';

/** A secret replaced by a rotation, still accepted until `expiresAt`. */
export interface PreviousSecret {
  sha256: string;
  expiresAt: string;
}

export interface KeyRecord {
  id: string;
  name: string;
  plan: Plan;
  /** The key's own limits over its plan's windows (required on a plan without windows). */
  limits?: Limits;
  /** What the key may do; absent: its plan's scopes. */
  scopes?: Scope[];
  /** Client addresses (CIDRs) the key may be used from; absent: any. */
  allowedCidrs?: string[];
  /** The customer the key belongs to, whose windows it shares; absent: the key stands for itself. */
  customerId?: string;
  /**
   * A key standing for itself spends credits from its own balance on these terms; null: none,
   * even if its plan has some; absent: its plan's (billing/credit-owner.ts). Unused while the key
   * belongs to a customer, whose terms and balance its requests spend.
   */
  credits?: CreditTerms | null;
  /** Hex SHA-256 of the key; the key itself is never stored. */
  sha256: string;
  /** First characters of the key, for people to recognise it (absent for keys from API_KEYS_FILE). */
  prefix?: string;
  createdAt: string;
  /** After this moment the key (and any previous secret) is refused with `expired_api_key`. */
  expiresAt?: string;
  /** The secret the last rotation replaced; at most one. */
  previous?: PreviousSecret;
  /** Last update, rotation or revocation: what replicas poll for to refresh their caches. */
  updatedAt?: string;
  revokedAt?: string;
}

/**
 * A change to a live key. `limits: null` and `expiresAt: null` remove the field; absent fields
 * stay as they are. Callers validate the resulting plan and limits (planProblem) first.
 */
export interface KeyChanges {
  plan?: Plan;
  limits?: Limits | null;
  scopes?: Scope[] | null;
  allowedCidrs?: string[] | null;
  name?: string;
  expiresAt?: string | null;
  /** Moves the key to another customer; null: the key stands for itself again. */
  customerId?: string | null;
  /** Credit terms of its own; null is stored (no credits, whatever the plan says); 'plan' removes the field. */
  credits?: CreditTermsChange;
}

/**
 * Applies a change in place to a record (or a keys-file entry): the one place, besides the Mongo
 * update it mirrors, that knows what `null` means for each field.
 *
 * A previous secret ends at the earlier of its own end, fixed at rotation, and the key's expiry.
 * When the expiry changes, the old one is folded into the previous secret's end first, so a later
 * or cleared expiry never brings a rotated-out secret back: its end can move earlier, never later.
 */
export function applyChanges(
  record: Pick<
    KeyRecord,
    'plan' | 'name' | 'limits' | 'scopes' | 'allowedCidrs' | 'expiresAt' | 'previous' | 'customerId' | 'credits'
  >,
  changes: KeyChanges,
): void {
  if (changes.plan !== undefined) record.plan = changes.plan;
  if (changes.name !== undefined) record.name = changes.name;
  if (changes.limits === null) delete record.limits;
  else if (changes.limits !== undefined) record.limits = { ...changes.limits };
  if (changes.scopes === null) delete record.scopes;
  else if (changes.scopes !== undefined) record.scopes = [...changes.scopes];
  if (changes.allowedCidrs === null) delete record.allowedCidrs;
  else if (changes.allowedCidrs !== undefined) record.allowedCidrs = [...changes.allowedCidrs];
  if (changes.customerId === null) delete record.customerId;
  else if (changes.customerId !== undefined) record.customerId = changes.customerId;
  if (changes.credits === PLAN_CREDITS) delete record.credits;
  else if (changes.credits !== undefined) record.credits = structuredClone(changes.credits);
  if (changes.expiresAt !== undefined && record.previous && record.expiresAt) {
    if (Date.parse(record.expiresAt) < Date.parse(record.previous.expiresAt)) {
      record.previous = { ...record.previous, expiresAt: record.expiresAt };
    }
  }
  if (changes.expiresAt === null) delete record.expiresAt;
  else if (changes.expiresAt !== undefined) record.expiresAt = changes.expiresAt;
}

/** A new secret for a key: the current one becomes `previous` until `previousExpiresAt`. */
export interface Rotation {
  sha256: string;
  prefix?: string;
  previousExpiresAt: string;
  /**
   * The hash of the secret being replaced: the rotation is made only while it is still the
   * current one, so two rotations planned from the same secret cannot both be made (the second
   * would end the first one's grace at once).
   */
  from?: string;
}

/** What a list of keys may be narrowed to, in the store (indexed in MongoDB). */
export interface KeyFilter {
  /** Names that start with this, ignoring case. */
  name?: string;
  plan?: Plan;
  /** Keys whose shown prefix starts with this (what a person reads off a leaked key). */
  prefix?: string;
  customerId?: string;
  /** true: revoked keys only; false: live keys only; absent: both. */
  revoked?: boolean;
}

/** Whether a record passes a filter; the memory store's version of the Mongo query. */
export function keyMatches(record: KeyRecord, filter: KeyFilter): boolean {
  if (filter.plan !== undefined && record.plan !== filter.plan) return false;
  if (filter.customerId !== undefined && record.customerId !== filter.customerId) return false;
  if (filter.revoked !== undefined && (record.revokedAt !== undefined) !== filter.revoked) return false;
  if (filter.prefix !== undefined && !(record.prefix ?? '').startsWith(filter.prefix)) return false;
  if (filter.name !== undefined && !record.name.toLowerCase().startsWith(filter.name.toLowerCase())) return false;
  return true;
}

/** What a replica needs to drop a changed key from its cache. */
export type ChangedKey = Pick<KeyRecord, 'id' | 'sha256' | 'updatedAt'>;

/** Where key records live. Revocation keeps the record (with revokedAt) so replicas can learn of it. */
export interface KeyStore {
  readonly kind: 'memory' | 'mongo' | 'redis';
  insert(record: KeyRecord): Promise<void>;
  /** The record whose current or previous secret has this hash. */
  findByHash(sha256: string): Promise<KeyRecord | null>;
  get(id: string): Promise<KeyRecord | null>;
  /**
   * The records of these ids (revoked ones too), in no order; unknown ids are left out. There is
   * no call for every record: a store may hold millions (lists page, reports ask for the keys
   * they show).
   */
  getMany(ids: readonly string[]): Promise<KeyRecord[]>;
  /** Keys newest first, a page at a time. Throws BadCursorError for a cursor it did not make. */
  page(filter: KeyFilter, request: PageRequest): Promise<Page<KeyRecord>>;
  /** Live keys whose expiry falls in [from, to]: what the expiry notices scan reads. */
  expiringBetween(from: Date, to: Date): Promise<KeyRecord[]>;
  /** The unrevoked keys of a customer, oldest first. */
  liveKeysOf(customerId: string): Promise<KeyRecord[]>;
  /** Applies changes to a live key; null when there is no such live (unrevoked) key. */
  update(id: string, changes: KeyChanges, at: Date): Promise<KeyRecord | null>;
  /**
   * Gives a live key a new secret; the current one becomes `previous`, replacing (and so ending)
   * any older previous secret. Null when there is no such live key, or its current secret is not
   * `rotation.from`.
   */
  rotate(id: string, rotation: Rotation, at: Date): Promise<KeyRecord | null>;
  /** Marks the key revoked; false when there is no such live key. */
  revoke(id: string, at: Date): Promise<boolean>;
  /** Keys updated, rotated or revoked after `since`, for replicas to evict from their caches. */
  changedSince(since: Date): Promise<ChangedKey[]>;
  ping(): Promise<void>;
}

export class DuplicateKeyError extends Error {
  constructor() {
    super('a key with this id or hash already exists');
  }
}
