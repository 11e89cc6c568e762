import { randomInt } from 'node:crypto';
import { type CreditTerms, type CreditTermsChange, PLAN_CREDITS } from '../credits/credit-terms.js';
import type { Billing } from '../limits/billing-period.js';
import type { Page, PageRequest } from '../paging/page.js';
import type { Limits, Plan } from '../plans/plans.js';

/** The account above the keys: what it bought (plan, limits) and when its month starts. */
export interface CustomerRecord {
  /** `cus_` and 16 characters. */
  id: string;
  name: string;
  plan: Plan;
  /** The customer's own limits over its plan's windows, shared by all its keys. */
  limits?: Limits;
  billing: Billing;
  /** The id the business knows the customer by (a Stripe customer id, a CRM id); unique among live customers. */
  externalId?: string;
  /** The business's own labels; strings only, so every backend stores them alike. */
  metadata?: Record<string, string>;
  /**
   * Its keys spend credits from its balance on these terms (credits/credit-terms.ts); null: none,
   * even if its plan has some; absent: its plan's (billing/credit-owner.ts).
   */
  credits?: CreditTerms | null;
  createdAt: string;
  /** Last change or deletion: what replicas poll for to refresh their caches. */
  updatedAt?: string;
  /** Deleted customers keep a record so replicas learn of the deletion; lists and gets skip them. */
  deletedAt?: string;
}

/** A change to a live customer; `null` removes an optional field, absent fields stay. */
export interface CustomerChanges {
  name?: string;
  plan?: Plan;
  limits?: Limits | null;
  billing?: Billing;
  externalId?: string | null;
  metadata?: Record<string, string> | null;
  /** null is stored (no credits); 'plan' removes the field (its plan's terms apply). */
  credits?: CreditTermsChange;
}

/** What a list may be narrowed to, in the store (indexed in MongoDB). */
export interface CustomerFilter {
  /** Names that start with this, ignoring case. */
  name?: string;
  plan?: Plan;
  externalId?: string;
}

export type ChangedCustomer = Pick<CustomerRecord, 'id' | 'updatedAt'>;

export interface CustomerStore {
  readonly kind: 'memory' | 'mongo' | 'redis';
  /** Throws DuplicateCustomerError when the id, or the externalId among live customers, is taken. */
  insert(record: CustomerRecord): Promise<void>;
  /** A live customer; null when there is none or it was deleted. */
  get(id: string): Promise<CustomerRecord | null>;
  /** Live customers, newest first, a page at a time. Throws BadCursorError for a cursor it did not make. */
  list(filter: CustomerFilter, page: PageRequest): Promise<Page<CustomerRecord>>;
  /** Applies changes to a live customer; null when there is none. May throw DuplicateCustomerError (externalId). */
  update(id: string, changes: CustomerChanges, at: Date): Promise<CustomerRecord | null>;
  /** Marks a live customer deleted; false when there is none. Callers check its keys first. */
  delete(id: string, at: Date): Promise<boolean>;
  /** Customers changed or deleted after `since`, for replicas to evict from their caches. */
  changedSince(since: Date): Promise<ChangedCustomer[]>;
  ping(): Promise<void>;
}

export class DuplicateCustomerError extends Error {
  constructor(readonly field: 'id' | 'externalId') {
    super(
      field === 'externalId'
        ? 'another customer already has this externalId'
        : 'a customer with this id already exists',
    );
  }
}

/** Applies a change in place: the one place, besides the Mongo update it mirrors, that knows what `null` means. */
export function applyCustomerChanges(record: CustomerRecord, changes: CustomerChanges): void {
  if (changes.name !== undefined) record.name = changes.name;
  if (changes.plan !== undefined) record.plan = changes.plan;
  if (changes.billing !== undefined) record.billing = { ...changes.billing };
  if (changes.limits === null) delete record.limits;
  else if (changes.limits !== undefined) record.limits = { ...changes.limits };
  if (changes.externalId === null) delete record.externalId;
  else if (changes.externalId !== undefined) record.externalId = changes.externalId;
  if (changes.metadata === null) delete record.metadata;
  else if (changes.metadata !== undefined) record.metadata = { ...changes.metadata };
  // null is kept: it turns the plan's credits off for this customer; 'plan' drops its own.
  if (changes.credits === PLAN_CREDITS) delete record.credits;
  else if (changes.credits !== undefined) record.credits = structuredClone(changes.credits);
}

/** Whether a record passes a filter; the memory store's version of the Mongo query. */
export function customerMatches(record: CustomerRecord, filter: CustomerFilter): boolean {
  if (record.deletedAt !== undefined) return false;
  if (filter.plan !== undefined && record.plan !== filter.plan) return false;
  if (filter.externalId !== undefined && record.externalId !== filter.externalId) return false;
  if (filter.name !== undefined && !record.name.toLowerCase().startsWith(filter.name.toLowerCase())) return false;
  return true;
}

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

export function newCustomerId(): string {
  let id = 'cus_';
  for (let i = 0; i < 16; i++) id += ALPHABET[randomInt(62)];
  return id;
}
