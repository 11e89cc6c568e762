import { isDeepStrictEqual } from 'node:util';
import type { CreditTerms } from '../credits/credit-terms.js';
import { type Billing, DEFAULT_BILLING } from '../limits/billing-period.js';
import { calendarFor } from '../limits/calendar.js';
import {
  ALGORITHMS,
  type Algorithm,
  customerPolicyFor,
  LIMIT_FIELDS,
  type LimitPolicy,
  type Limits,
  policyFor,
  WINDOW_NAMES,
  withCredits,
} from '../limits/policy.js';
import { WINDOWS } from '../limits/windows.js';
import { SCOPES, type Scope } from '../proxy/proxied-routes.js';
import type { BillableStatuses } from './billable.js';
import type { PlanPrice } from './plan-price.js';

export type { Algorithm, Limits } from '../limits/policy.js';

// The scopes are named where the routes that need them are listed, below every plan.
export { SCOPES, type Scope } from '../proxy/proxied-routes.js';

/** A plan's name; the plans in force (PlanBook) say which names exist. */
export type Plan = string;

export interface PlanDefinition {
  /** Its windows' limits; absent: every key of the plan carries its own (the spec's enterprise). */
  windows?: Limits;
  /** How its second, minute and hour windows count; day and month are calendar quotas. */
  algorithm: Algorithm;
  /** The scopes of its keys, unless a key has its own. */
  scopes: readonly Scope[];
  /** Refuses nothing for limits or bans; would-be refusals are counted and logged. */
  shadow: boolean;
  /** For people: what the plan is for. */
  description?: string;
  /** The most live keys a customer of the plan may hold by creating them in the portal (DEFAULT_MAX_KEYS). */
  maxKeys?: number;
  /** What a billing period of the plan costs (plan-price.ts); absent: the plan is not priced here. */
  price?: PlanPrice;
  /** Credit terms its customers and lone keys spend under unless their own say otherwise. */
  credits?: CreditTerms;
  /** The upstream statuses it bills (billable.ts); absent: every status but 502, 503 and 504. */
  billable?: BillableStatuses;
}

/** A plan's maxKeys when it names none. */
const DEFAULT_MAX_KEYS = 5;

/** The most live keys a customer of this plan may create for itself in the portal. */
export function maxKeysFor(book: PlanBook, plan: Plan): number {
  return book.plans.get(plan)?.maxKeys ?? DEFAULT_MAX_KEYS;
}

/** The plans in force and what each route costs: the spec's table, or PLANS_FILE. */
export interface PlanBook {
  plans: ReadonlyMap<Plan, PlanDefinition>;
  /** Units a request takes from every window, by `METHOD /route` (default 1). */
  routeCosts: ReadonlyMap<string, number>;
  /** RATE_LIMIT_SHADOW: every plan in shadow mode. */
  shadow: boolean;
  /** Where the plans come from, for the start-up log and GET /admin/plans. */
  source: string;
}

const ALL_SCOPES: readonly Scope[] = SCOPES;

/** The spec's four plans; enterprise limits live on each key. */
export const DEFAULT_PLANS: PlanBook = {
  plans: new Map<Plan, PlanDefinition>([
    ['free', { windows: { perMinute: 60, perDay: 1_000 }, algorithm: 'fixed', scopes: ALL_SCOPES, shadow: false }],
    ['pro', { windows: { perMinute: 300, perDay: 10_000 }, algorithm: 'fixed', scopes: ALL_SCOPES, shadow: false }],
    [
      'business',
      { windows: { perMinute: 1_000, perDay: 100_000 }, algorithm: 'fixed', scopes: ALL_SCOPES, shadow: false },
    ],
    ['enterprise', { algorithm: 'fixed', scopes: ALL_SCOPES, shadow: false }],
  ]),
  routeCosts: new Map(),
  shadow: false,
  source: 'built-in (the spec’s four plans)',
};

function isPlan(book: PlanBook, value: unknown): value is Plan {
  return typeof value === 'string' && book.plans.has(value);
}

/**
 * A key's limits: its plan's windows with the key's own over them. Empty for a key whose plan
 * is not in force (a PLANS_FILE that dropped it) and that has none of its own.
 */
export function limitsFor(book: PlanBook, plan: Plan, custom?: Limits): Limits {
  const windows = book.plans.get(plan)?.windows;
  if (!windows) return custom ?? {};
  return custom ? { ...windows, ...custom } : windows;
}

/** What a key's customer bought: the plan and limits its keys share, and its billing calendar. */
export interface CustomerTerms {
  plan: Plan;
  limits?: Limits | undefined;
  billing: Billing;
  /** Its own credit terms (credits/credit-terms.ts); null: none; absent: its plan's. */
  credits?: CreditTerms | null | undefined;
}

/**
 * Whether two customers' terms make the same policy (policyForKey reads these and nothing
 * else of a customer), compared by value: a record fetched again unchanged keeps its policy, and
 * any change of what it bought, however soon after the last one, does not.
 */
export function sameCustomerTerms(a: CustomerTerms, b: CustomerTerms): boolean {
  return (
    a.plan === b.plan &&
    isDeepStrictEqual(a.limits, b.limits) &&
    isDeepStrictEqual(a.billing, b.billing) &&
    isDeepStrictEqual(a.credits, b.credits)
  );
}

/** What a key holds of its own terms (a KeyRecord has them): its plan, limits and credit terms. */
export interface KeyTerms {
  plan: Plan;
  limits?: Limits | undefined;
  credits?: CreditTerms | null | undefined;
}

/**
 * What the limiter enforces for a key: the windows and credits of the subject it is limited and
 * billed as, its customer or, standing alone, the key itself (its plan, with its own limits over
 * them, and its own credit terms, in UTC); for a key of a customer, the key's own limits as
 * windows of the key besides. Throws for a key nothing limits: the subject's plan is not in force,
 * or has no windows, and no limits are given. Such a key fails its requests (500, logged) until an
 * operator moves it, or its customer, to a plan in force: serving it unlimited would be worse.
 */
export function policyForKey(book: PlanBook, key: KeyTerms, customer?: CustomerTerms | null): LimitPolicy {
  const subject: CustomerTerms = customer ?? {
    plan: key.plan,
    limits: key.limits,
    billing: DEFAULT_BILLING,
    credits: key.credits,
  };
  const own = customer ? key.limits : undefined;
  const definition = book.plans.get(subject.plan);
  const shared = limitsFor(book, subject.plan, subject.limits);
  if (Object.keys(shared).length === 0 && (!own || Object.keys(own).length === 0)) {
    throw new Error(unlimitedMessage(book, subject.plan, definition !== undefined, customer ? 'customer' : 'key'));
  }
  const algorithm = definition?.algorithm ?? 'fixed';
  const shadow = book.shadow || (definition?.shadow ?? false);
  // The windows of a key standing alone are the key's (its Redis keys name it); a customer's are
  // the customer's, which each of its keys counts against.
  const policy = customer
    ? customerPolicyFor(shared, own, algorithm, shadow, subject.billing)
    : policyFor(shared, algorithm, shadow);
  const terms = creditTermsIn(book, subject.plan, subject.credits);
  return terms ? withCredits(policy, terms, calendarFor(subject.billing)) : policy;
}

/** A customer's windows and credits alone: what any of its keys without limits of its own counts against. */
export function policyForCustomer(book: PlanBook, customer: CustomerTerms): LimitPolicy {
  return policyForKey(book, { plan: customer.plan }, customer);
}

/** Why nothing limits a subject, and what an operator does about it. */
function unlimitedMessage(book: PlanBook, plan: Plan, inForce: boolean, subject: 'key' | 'customer'): string {
  if (subject === 'key') {
    return inForce
      ? `keys of the ${plan} plan carry their own limits, and this one has none`
      : `the key's plan ${plan} is not in force (${book.source}): move it to one that is (keys update ID --plan P)`;
  }
  return inForce
    ? `customer's ${plan} plan has no windows, and neither the customer nor the key has limits of its own`
    : `the customer's plan ${plan} is not in force (${book.source}): move the customer to one that is`;
}

/** The scopes a key has: its own, else its plan's. */
export function scopesFor(book: PlanBook, plan: Plan, own?: readonly Scope[]): readonly Scope[] {
  return own ?? book.plans.get(plan)?.scopes ?? ALL_SCOPES;
}

/**
 * A key's own limits after an update (admin API and keys file alike): the ones given, else the
 * key's own as they are, unless the update moves the key to another plan with windows of its
 * own: a plan change brings the new plan's limits. A change of anything else (name, expiry,
 * scopes, addresses), or a "change" to the plan the key already has, keeps them: they are what
 * the customer was given.
 */
export function limitsAfterChange(
  book: PlanBook,
  from: Plan,
  to: Plan,
  given: Limits | undefined,
  current: Limits | undefined,
): Limits | undefined {
  if (given) return given;
  if (to === from || !book.plans.get(to)?.windows) return current;
  return undefined;
}

/** How a caller names the fields in its messages: JSON paths for the API, flags for the CLI. */
export interface LimitNames {
  plan: string;
  limits: string;
  field(field: keyof Limits): string;
}

/** The admin API's names: its JSON fields. */
export const JSON_NAMES: LimitNames = {
  plan: 'plan',
  limits: `limits { ${WINDOWS.map((w) => w.field).join(', ')} }`,
  field: (field) => `limits.${field}`,
};

const MAX_LIMIT = 1_000_000_000;

/** Why limits are unacceptable (each a positive integer; a longer window never below a shorter one). */
function limitsProblem(limits: unknown, names: LimitNames): string | null {
  // From a file, limits can be anything JSON holds; null would throw below.
  if (typeof limits !== 'object' || limits === null || Array.isArray(limits))
    return `${names.limits} must be an object`;
  const given = limits as Record<string, unknown>;
  const known = new Set<string>(Object.values(LIMIT_FIELDS));
  for (const field of Object.keys(given)) {
    if (!known.has(field)) return `${names.limits}: unknown field ${JSON.stringify(field.slice(0, 40))}`;
  }
  for (const { field } of WINDOWS) {
    const n = given[field];
    if (n === undefined) continue;
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1 || n > MAX_LIMIT) {
      return `${names.field(field)} must be an integer from 1 to ${MAX_LIMIT}`;
    }
  }
  return null;
}

/** Why windows are out of order: a longer window may not allow less than a shorter one. */
function orderProblem(limits: Limits, names: LimitNames): string | null {
  let shorter: keyof Limits | undefined;
  for (const { field } of WINDOWS) {
    const limit = limits[field];
    if (limit === undefined) continue;
    if (shorter !== undefined && (limits[shorter] as number) > limit) {
      return `${names.field(shorter)} cannot exceed ${names.field(field)}`;
    }
    shorter = field;
  }
  return null;
}

/**
 * Why a plan/limits pair is unacceptable, or null when it is fine. Shared by the admin API, CLI
 * and keys file, each naming the fields as its users write them. Any key may set limits of its
 * own over its plan's windows; a plan without windows needs them.
 */
export function planProblem(
  book: PlanBook,
  plan: unknown,
  limits: unknown,
  names: LimitNames = JSON_NAMES,
): string | null {
  if (!isPlan(book, plan)) return `${names.plan} must be one of ${[...book.plans.keys()].join(', ')}`;
  const definition = book.plans.get(plan) as PlanDefinition;
  if (limits === undefined) return definition.windows ? null : `${plan} keys need ${names.limits}`;
  const problem = limitsProblem(limits, names);
  if (problem) return problem;
  if (Object.keys(limits as object).length === 0) return `${names.limits} must set at least one window`;
  return orderProblem(limitsFor(book, plan, limits as Limits), names);
}

/** Why a list of scopes is unacceptable (known names, no repeats), or null. */
export function scopesProblem(scopes: unknown, name: string): string | null {
  if (!Array.isArray(scopes)) return `${name} must be a list of ${SCOPES.join(', ')}`;
  const seen = new Set<string>();
  for (const scope of scopes) {
    if (typeof scope !== 'string' || !(SCOPES as readonly string[]).includes(scope)) {
      return `${name} may hold only ${SCOPES.join(', ')}`;
    }
    if (seen.has(scope)) return `${name} names ${scope} twice`;
    seen.add(scope);
  }
  return null;
}

export { ALGORITHMS, LIMIT_FIELDS, WINDOW_NAMES };

/**
 * The terms in force for a record on `plan`: its own; `null`, none (it turned its plan's off);
 * absent, its plan's (PLANS_FILE `credits`). One rule for customers and keys alike.
 */
export function creditTermsIn(
  plans: PlanBook,
  plan: string,
  own: CreditTerms | null | undefined,
): CreditTerms | undefined {
  if (own === null) return undefined;
  return own ?? plans.plans.get(plan)?.credits;
}
