import { isPlainText } from '@animal-store/common/plain-text.js';
import { type CreditTerms, creditTermsProblem, storedCreditTerms } from '../credits/credit-terms.js';
import { type Billing, billingProblem, DEFAULT_BILLING, ianaTimeZone } from '../limits/billing-period.js';
import { type Limits, type Plan, type PlanBook, planProblem } from '../plans/plans.js';
import type { CustomerRecord } from './customer-store.js';

/*
 * The customers of an API_KEYS_FILE (`{ "keys": [...], "customers": [...] }`), so replicas without
 * MongoDB share customers as they share keys: checked here entry by entry as the admin API checks
 * a create (plan and limits, billing, externalId, metadata), and loaded read-only in front of the
 * customer store (file-customers.ts).
 */

/** One customer of API_KEYS_FILE. */
export interface CustomerFileEntry {
  id: string;
  name: string;
  plan: Plan;
  limits?: Limits;
  billing?: Billing;
  externalId?: string;
  metadata?: Record<string, string>;
  /** Its credit terms (null: none, even if its plan has some; absent: its plan's). */
  credits?: CreditTerms | null;
}

const EXTERNAL_ID = /^[\x21-\x7e]{1,128}$/;
const METADATA_NAME = /^[A-Za-z0-9_.:-]{1,40}$/;

function metadataProblem(metadata: unknown, at: string): string | null {
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
    return `${at}: metadata must be an object of strings`;
  }
  const entries = Object.entries(metadata);
  if (entries.length > 50) return `${at}: metadata holds at most 50 labels`;
  for (const [name, value] of entries) {
    if (!METADATA_NAME.test(name))
      return `${at}: metadata name ${JSON.stringify(name.slice(0, 50))} must be 1–40 of A-Z a-z 0-9 _ . : -`;
    if (typeof value !== 'string' || value.length > 500 || !isPlainText(value)) {
      return `${at}: metadata.${name} must be plain text of up to 500 characters`;
    }
  }
  return null;
}

/** What is wrong with one customer entry (`at` names it), or null. */
function customerEntryProblem(plans: PlanBook, entry: unknown, at: string): string | null {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return `${at} is not an object`;
  const e = entry as Record<string, unknown>;
  if (typeof e.id !== 'string' || e.id.length === 0 || e.id.length > 64) return `${at}: id must be 1–64 characters`;
  if (typeof e.name !== 'string' || e.name.length === 0 || e.name.length > 100 || !isPlainText(e.name)) {
    return `${at}: name must be plain text of 1–100 characters`;
  }
  const plan = planProblem(plans, e.plan, e.limits);
  if (plan) return `${at}: ${plan}`;
  if (e.billing !== undefined) {
    if (typeof e.billing !== 'object' || e.billing === null) return `${at}: billing must be { anchorDay, timeZone }`;
    const billing = billingProblem(e.billing);
    if (billing) return `${at}: ${billing}`;
  }
  if (e.externalId !== undefined && (typeof e.externalId !== 'string' || !EXTERNAL_ID.test(e.externalId))) {
    return `${at}: externalId must be 1–128 visible ASCII characters`;
  }
  if (e.credits !== undefined && e.credits !== null) {
    const credits = creditTermsProblem(e.credits, `${at}: credits`);
    if (credits) return credits;
  }
  return e.metadata === undefined ? null : metadataProblem(e.metadata, at);
}

/** Every problem of the file's customers (each naming its entry), duplicates included. */
export function customersFileProblems(plans: PlanBook, customers: unknown): string[] {
  if (!Array.isArray(customers)) return ['customers must be an array'];
  const problems = customers
    .map((entry, index) => customerEntryProblem(plans, entry, `customer ${index}`))
    .filter((p): p is string => p !== null);
  const ids = new Set<string>();
  const externalIds = new Set<string>();
  for (const c of customers as Array<Partial<CustomerFileEntry> | null>) {
    if (typeof c !== 'object' || c === null) continue;
    if (typeof c.id === 'string') {
      if (ids.has(c.id)) problems.push(`duplicate customer id ${c.id}`);
      ids.add(c.id);
    }
    if (typeof c.externalId === 'string') {
      if (externalIds.has(c.externalId)) problems.push(`duplicate customer externalId ${c.externalId}`);
      externalIds.add(c.externalId);
    }
  }
  return problems;
}

/** What the file keeps of a customer: only known fields, the time zone under the IANA name given. */
export function toCustomerFileEntry(record: CustomerFileEntry): CustomerFileEntry {
  return {
    id: record.id,
    name: record.name,
    plan: record.plan,
    ...(record.limits ? { limits: { ...record.limits } } : {}),
    ...(record.billing
      ? {
          billing: {
            anchorDay: record.billing.anchorDay ?? DEFAULT_BILLING.anchorDay,
            timeZone: ianaTimeZone(record.billing.timeZone ?? DEFAULT_BILLING.timeZone) ?? record.billing.timeZone,
          },
        }
      : {}),
    ...(record.externalId !== undefined ? { externalId: record.externalId } : {}),
    ...(record.metadata !== undefined ? { metadata: { ...record.metadata } } : {}),
    ...(record.credits !== undefined
      ? { credits: record.credits === null ? null : storedCreditTerms(record.credits) }
      : {}),
  };
}

/** A file customer as the stores hold customers; the file keeps no times, so `loadedAt` is its createdAt. */
export function toCustomerRecord(entry: CustomerFileEntry, loadedAt: Date): CustomerRecord {
  const kept = toCustomerFileEntry(entry);
  return { ...kept, billing: kept.billing ?? { ...DEFAULT_BILLING }, createdAt: loadedAt.toISOString() };
}
