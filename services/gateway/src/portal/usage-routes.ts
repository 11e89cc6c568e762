import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { HistoryQuery as AdminHistoryQuery } from '../api/history-schemas.js';
import { liveWindows } from '../api/live-windows.js';
import { iso } from '../api/shared.js';
import { historyUnavailable, unavailable } from '../api/store-unavailable.js';
import { customerOwner } from '../billing/credit-owner.js';
import { ownerCredits } from '../credits/owner-credits.js';
import { stepAt } from '../customers/customer-steps.js';
import type { CustomerRecord } from '../customers/customer-store.js';
import { subjectHistory } from '../customers/subject-history.js';
import type { GatewayDeps } from '../deps.js';
import { DEFAULT_GRACE_SECONDS, MAX_GRACE_SECONDS } from '../keys/key-operations.js';
import type { KeyRecord } from '../keys/key-store.js';
import { limitsFor, maxKeysFor, policyForCustomer, policyForKey, scopesFor } from '../plans/plans.js';
import { sumOf } from '../usage/reports.js';
import { liveKeysOf, ownKey, signedInCustomer } from './own-keys.js';

type Deps = Pick<
  GatewayDeps,
  'plans' | 'keyStore' | 'keyResolver' | 'customerStore' | 'limiter' | 'history' | 'credits' | 'webhooks' | 'now'
>;

const HistoryQuery = Type.Object(
  {
    ...Type.Omit(AdminHistoryQuery, ['format']).properties,
    /** One of the customer's keys instead of all of them. */
    keyId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  },
  { additionalProperties: false },
);

/**
 * The windows of each of the customer's live keys that has limits of its own (a key may, beside
 * the windows all its keys share), as GET /v1/usage answers them under `key.windows`: read from
 * the limiter, never counted. A key without limits of its own has no windows but the shared ones,
 * and is left out.
 */
async function keysOwnWindows(deps: Deps, customer: CustomerRecord, live: readonly KeyRecord[]) {
  const own = live.filter((k) => k.limits !== undefined && Object.keys(k.limits).length > 0);
  return Promise.all(
    own.map(async (record) => {
      const policy = policyForKey(deps.plans, record, customer);
      const usage = await deps.limiter.usage(record.id, policy, customer.id);
      return { id: record.id, name: record.name, windows: liveWindows(policy, usage.windows, 'key') };
    }),
  );
}

/** The customer's shared windows now, its keys' own, and its units this billing period. */
async function quotasNow(deps: Deps, customer: CustomerRecord, log: { error(obj: object, msg: string): void }) {
  const now = deps.now();
  const period = stepAt('period', customer.billing, now);
  const limits = limitsFor(deps.plans, customer.plan, customer.limits);
  // Read before the limiter, outside its 503: the key store's own failure is classified as such.
  const live = (await liveKeysOf(deps, customer.id)).map((k) => k.record);
  try {
    const [hours, keys] = await Promise.all([
      deps.history.hours(customer.id, period.start, stepAt('hour', customer.billing, now).end),
      keysOwnWindows(deps, customer, live),
    ]);
    const windows =
      Object.keys(limits).length === 0
        ? {}
        : liveWindows(
            policyForCustomer(deps.plans, customer),
            await deps.limiter.customerUsage(customer.id, policyForCustomer(deps.plans, customer)),
            'customer',
          );
    return {
      windows,
      keys,
      billingPeriod: { start: iso(period.start), end: iso(period.end), units: sumOf(hours).units },
    };
  } catch (err) {
    log.error({ err }, 'cannot read usage');
    throw unavailable('rate_limiter_unavailable', 'Cannot reach Redis to read usage');
  }
}

/**
 * What the signed-in customer reads: who it is (and the session's CSRF token, for the page's
 * changes), its quotas now (with its credits, when it has credit terms), and its usage over time by hour, local day or billing period, for all
 * its keys or one of them; the history is the admin route's (subjectHistory).
 */
export const portalUsageRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.get('/portal/api/session', async (request) => {
    const customer = await signedInCustomer(deps, request);
    const session = request.portalSession as NonNullable<typeof request.portalSession>;
    return {
      customer: { id: customer.id, name: customer.name, plan: customer.plan, billing: customer.billing },
      csrfToken: session.csrfToken,
      expiresAt: iso(session.expiresAt),
      maxKeys: maxKeysFor(deps.plans, customer.plan),
      scopes: scopesFor(deps.plans, customer.plan),
      grace: { defaultSeconds: DEFAULT_GRACE_SECONDS, maxSeconds: MAX_GRACE_SECONDS },
    };
  });

  app.get('/portal/api/usage', async (request) => {
    const customer = await signedInCustomer(deps, request);
    const owner = customerOwner(deps.plans, customer);
    const [quotas, credits] = await Promise.all([
      quotasNow(deps, customer, request.log),
      owner.terms ? ownerCredits(deps, owner) : null,
    ]);
    return {
      id: customer.id,
      plan: customer.plan,
      ...quotas,
      // As GET /v1/usage: only for a customer with credit terms, with the terms' refill amount.
      ...(credits && owner.terms ? { credits: { ...credits, refill: owner.terms.refill ?? null } } : {}),
    };
  });

  app.get('/portal/api/usage/history', { schema: { querystring: HistoryQuery } }, async (request) => {
    const customer = await signedInCustomer(deps, request);
    const { keyId, ...query } = request.query;
    if (keyId !== undefined) await ownKey(deps, request, keyId);
    return subjectHistory(
      deps.history,
      customer,
      query,
      deps.now(),
      (err) => historyUnavailable(err, request.log),
      keyId === undefined ? { id: customer.id } : { id: keyId, customerId: customer.id },
    );
  });
};
