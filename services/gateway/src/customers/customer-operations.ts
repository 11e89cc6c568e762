import {
  type CreditTerms,
  type CreditTermsChange,
  creditTermsProblem,
  PLAN_CREDITS,
  storedCreditTerms,
} from '../credits/credit-terms.js';
import { type Billing, billingProblem, DEFAULT_BILLING, ianaTimeZone } from '../limits/billing-period.js';
import {
  JSON_NAMES,
  type LimitNames,
  type Limits,
  limitsAfterChange,
  type Plan,
  type PlanBook,
  planProblem,
} from '../plans/plans.js';
import { type CustomerChanges, type CustomerRecord, newCustomerId } from './customer-store.js';

/*
 * The rules for making and changing customers, whoever asks: the admin API now, the CLI and the
 * keys file with it. Each caller checks the shape first (a JSON schema, flags); what needs the
 * plans in force or the customer as it stands is decided here, as keys/key-operations.ts does for
 * keys, with the same plan and limits rules (planProblem, limitsAfterChange).
 */

/** A request the customer rules refuse: the admin API answers 400, the CLI exits 2. */
export class CustomerRuleError extends Error {}

export interface CustomerRequest {
  name: string;
  plan: string;
  limits?: Limits;
  billing?: Partial<Billing>;
  externalId?: string;
  metadata?: Record<string, string>;
  credits?: CreditTerms;
}

export interface CustomerUpdate {
  name?: string;
  plan?: string;
  limits?: Limits | null;
  billing?: Partial<Billing>;
  externalId?: string | null;
  metadata?: Record<string, string> | null;
  /** Its own terms; null: none, even if its plan has some; 'plan': its own dropped, its plan's apply. */
  credits?: CreditTermsChange;
}

/** Credit terms as stored, or the refusal naming what is wrong with them. */
function checkedCredits(given: CreditTerms): CreditTerms {
  const problem = creditTermsProblem(given);
  if (problem) throw new CustomerRuleError(problem);
  return storedCreditTerms(given);
}

/** Billing settings as stored: whole, with the zone under the IANA name given (ianaTimeZone). */
function checkedBilling(given: Partial<Billing> | undefined, base: Billing): Billing {
  if (given === undefined) return base;
  const problem = billingProblem(given);
  if (problem) throw new CustomerRuleError(problem);
  return {
    anchorDay: given.anchorDay ?? base.anchorDay,
    timeZone: given.timeZone === undefined ? base.timeZone : (ianaTimeZone(given.timeZone) as string),
  };
}

export function checkNewCustomer(
  plans: PlanBook,
  request: CustomerRequest,
  now: number,
  names: LimitNames = JSON_NAMES,
): CustomerRecord {
  const problem = planProblem(plans, request.plan, request.limits, names);
  if (problem) throw new CustomerRuleError(problem);
  return {
    id: newCustomerId(),
    name: request.name,
    plan: request.plan as Plan,
    ...(request.limits ? { limits: { ...request.limits } } : {}),
    billing: checkedBilling(request.billing, DEFAULT_BILLING),
    ...(request.externalId !== undefined ? { externalId: request.externalId } : {}),
    ...(request.metadata !== undefined ? { metadata: { ...request.metadata } } : {}),
    ...(request.credits !== undefined ? { credits: checkedCredits(request.credits) } : {}),
    createdAt: new Date(now).toISOString(),
  };
}

/**
 * The change an update makes to a customer as it stands. Its own limits change only when new ones
 * are given or dropped, or it moves to another plan with windows: a rename or new billing
 * settings keep what it was sold.
 */
export function customerChanges(
  plans: PlanBook,
  current: CustomerRecord,
  update: CustomerUpdate,
  names: LimitNames = JSON_NAMES,
): CustomerChanges {
  const plan = update.plan ?? current.plan;
  const limits =
    update.limits === null ? undefined : limitsAfterChange(plans, current.plan, plan, update.limits, current.limits);
  const problem = planProblem(plans, plan, limits, names);
  if (problem) throw new CustomerRuleError(problem);
  return {
    ...(update.name !== undefined ? { name: update.name } : {}),
    ...(update.plan !== undefined ? { plan: update.plan } : {}),
    ...(limits === current.limits ? {} : limits ? { limits } : { limits: null }),
    ...(update.billing !== undefined ? { billing: checkedBilling(update.billing, current.billing) } : {}),
    ...(update.externalId !== undefined ? { externalId: update.externalId } : {}),
    ...(update.metadata !== undefined ? { metadata: update.metadata } : {}),
    ...(update.credits === null || update.credits === PLAN_CREDITS ? { credits: update.credits } : {}),
    ...(typeof update.credits === 'object' && update.credits !== null
      ? { credits: checkedCredits(update.credits) }
      : {}),
  };
}
