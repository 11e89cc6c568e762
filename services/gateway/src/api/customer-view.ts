import type { Static } from 'typebox';
import type { CustomerRecord } from '../customers/customer-store.js';
import type { GatewayDeps } from '../deps.js';
import { billingPeriod } from '../limits/billing-period.js';
import { creditTermsIn, limitsFor } from '../plans/plans.js';
import type { CustomerViewSchema } from './customer-schemas.js';

type CustomerView = Static<typeof CustomerViewSchema>;

/**
 * What an operator sees of a customer: its limits and credit terms in force, with its own beside
 * them (what a plan change or "credits": "plan" would drop), and the billing period it is in now.
 */
export function customerView(deps: Pick<GatewayDeps, 'plans' | 'now'>, record: CustomerRecord): CustomerView {
  const period = billingPeriod(new Date(deps.now()), record.billing);
  const credits = creditTermsIn(deps.plans, record.plan, record.credits);
  return {
    id: record.id,
    name: record.name,
    plan: record.plan,
    limits: limitsFor(deps.plans, record.plan, record.limits),
    ...(record.limits ? { ownLimits: record.limits } : {}),
    billing: record.billing,
    currentPeriod: { start: period.start.toISOString(), end: period.end.toISOString() },
    ...(record.externalId !== undefined ? { externalId: record.externalId } : {}),
    ...(record.metadata !== undefined ? { metadata: record.metadata } : {}),
    ...(credits !== undefined ? { credits } : {}),
    // Absent (not null) when it follows its plan: null says it turned its plan's terms off.
    ...(record.credits !== undefined ? { ownCredits: record.credits } : {}),
    createdAt: record.createdAt,
    ...(record.updatedAt ? { updatedAt: record.updatedAt } : {}),
  };
}
