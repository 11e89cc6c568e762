import type { Static } from 'typebox';
import { liveWindows } from '../api/live-windows.js';
import { iso } from '../api/shared.js';
import { unavailable } from '../api/store-unavailable.js';
import { creditOwnerOf, customerOwner } from '../billing/credit-owner.js';
import { ownerCredits } from '../credits/owner-credits.js';
import { stepAt } from '../customers/customer-steps.js';
import type { CustomerRecord } from '../customers/customer-store.js';
import type { GatewayDeps } from '../deps.js';
import type { KeyRecord } from '../keys/key-store.js';
import { DEFAULT_BILLING } from '../limits/billing-period.js';
import { calendarFor } from '../limits/calendar.js';
import type { KeyUsage } from '../limits/key-limiter.js';
import { policyForKey } from '../plans/plans.js';
import { sumOf } from '../usage/reports.js';
import type { SelfUsageSchema } from './usage-schema.js';

export type SelfUsage = Static<typeof SelfUsageSchema>;

type Deps = Pick<GatewayDeps, 'limiter' | 'history' | 'plans' | 'credits' | 'webhooks' | 'now'>;

/**
 * Whose credits the key's requests spend: its customer's, or, for a key of no customer, its own
 * (credit-owner.ts). Null for a key whose customer is gone: it has no balance to show.
 */
function creditOwner(deps: Pick<GatewayDeps, 'plans'>, record: KeyRecord, customer: CustomerRecord | null) {
  if (customer) return customerOwner(deps.plans, customer);
  // Stryker disable next-line StringLiteral: creditOwnerOf tells only 'customer' apart; any other kind is the key
  return record.customerId === undefined ? creditOwnerOf(deps.plans, { kind: 'key', record }) : null;
}

/**
 * A key's usage as its holder may see it: its windows and ban as the limiter holds them (read,
 * never counted), its customer's shared windows, and the units each one was billed this billing
 * period, summed from the usage history as the admin API's history routes sum them, and the
 * credits its requests spend when there are credit terms in force (read as the admin API reads
 * them): its customer's, or a key of no customer's own. A key of no customer is billed by the UTC
 * calendar month, the one its month quota counts.
 */
export async function selfUsage(
  deps: Deps,
  record: KeyRecord,
  customer: CustomerRecord | null,
  log: { error(obj: object, msg: string): void },
): Promise<SelfUsage> {
  const now = deps.now();
  const policy = policyForKey(deps.plans, record, customer);
  const billing = customer?.billing ?? DEFAULT_BILLING;
  // Stryker disable next-line StringLiteral: stepAt reads every name but 'hour' and 'day' as the period
  const period = stepAt('period', billing, now);
  const to = stepAt('hour', billing, now).end;
  let usage: KeyUsage;
  let keyUnits: number;
  let customerUnits = 0;
  let credits: Awaited<ReturnType<typeof ownerCredits>> | null;
  const owner = creditOwner(deps, record, customer);
  try {
    const [read, keyHours, customerHours, balance] = await Promise.all([
      deps.limiter.usage(record.id, policy, record.customerId),
      deps.history.hours(record.id, period.start, to, record.customerId),
      // Stryker disable next-line ArrayDeclaration: without a customer its units are never read
      customer ? deps.history.hours(customer.id, period.start, to) : Promise.resolve([]),
      owner?.terms ? ownerCredits(deps, owner) : null,
    ]);
    usage = read;
    credits = balance;
    keyUnits = sumOf(keyHours).units;
    customerUnits = sumOf(customerHours).units;
  } catch (err) {
    log.error({ err }, 'cannot read usage');
    throw unavailable('rate_limiter_unavailable', 'Cannot reach Redis to read usage');
  }
  const calendar = calendarFor(billing);
  const billingPeriod = (units: number) => ({ start: iso(period.start), end: iso(period.end), units });
  const balance = credits ? { credits: { balance: credits.balance, nextRefillAt: credits.nextRefillAt } } : {};
  return {
    key: {
      id: record.id,
      name: record.name,
      plan: record.plan,
      windows: liveWindows(policy, usage.windows, 'key'),
      ban: usage.banEndsAt === null ? null : { until: iso(usage.banEndsAt) },
      calendar: {
        timeZone: billing.timeZone,
        anchorDay: billing.anchorDay,
        dayResetsAt: iso(calendar.end('day', now)),
        monthResetsAt: iso(calendar.end('month', now)),
      },
      billingPeriod: billingPeriod(keyUnits),
      ...(owner?.kind === 'key' ? balance : {}),
    },
    ...(customer
      ? {
          customer: {
            id: customer.id,
            name: customer.name,
            plan: customer.plan,
            windows: liveWindows(policy, usage.windows, 'customer'),
            billingPeriod: billingPeriod(customerUnits),
            ...balance,
          },
        }
      : {}),
  };
}
