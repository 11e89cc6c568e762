import { randomBytes } from 'node:crypto';
import { ApiError, clipped } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { CreditChange, CreditEntry } from '../../credits/credit-ledger.js';
import { type CreditRule, refillPeriod } from '../../credits/credit-terms.js';
import type { CustomerRecord } from '../../customers/customer-store.js';
import type { GatewayDeps } from '../../deps.js';
import { calendarFor } from '../../limits/calendar.js';
import { BadCursorError, DEFAULT_PAGE_SIZE } from '../../paging/page.js';
import { audit } from '../audit.js';
import {
  CreditBalanceSchema,
  CreditChangeSchema,
  CreditChangeViewSchema,
  CreditLedgerPageSchema,
  CreditLedgerQuery,
} from '../credit-schemas.js';
import { CustomerIdParams } from '../customer-schemas.js';
import { type AdminRouteOptions, errors, idempotentErrors, iso } from '../shared.js';

/** The customer's credit terms as the ledger applies them (no refill for one without credits). */
const ruleOf = (customer: CustomerRecord): CreditRule => ({
  refill: customer.credits?.refill ?? null,
  calendar: calendarFor(customer.billing),
});

const openHourView = (open: { start: number; spent: number } | null) =>
  open ? { start: iso(open.start), end: iso(open.start + 3_600_000), spent: open.spent } : null;

function entryView({ end, at, ...rest }: CreditEntry) {
  return { ...rest, at: iso(at), ...(end !== undefined ? { end: iso(end) } : {}) };
}

async function customerOf(deps: Pick<GatewayDeps, 'customerStore'>, id: string): Promise<CustomerRecord> {
  const customer = await deps.customerStore.get(id);
  if (!customer) throw new ApiError(404, 'not_found', `No customer with id ${clipped(id)}`);
  return customer;
}

/** A page of a ledger, a cursor it did not give out refused with 400. */
async function ledgerPage(deps: Pick<GatewayDeps, 'credits'>, owner: string, limit?: number, after?: string) {
  try {
    return await deps.credits.page(owner, {
      limit: limit ?? DEFAULT_PAGE_SIZE,
      ...(after !== undefined ? { after } : {}),
    });
  } catch (err) {
    if (err instanceof BadCursorError) throw new ApiError(400, 'invalid_request', `after: ${err.message}`);
    throw err;
  }
}

/** A change by hand as the ledger takes it, under a reference of its own; refused with 400 or 409. */
function checkedChange(
  customer: CustomerRecord,
  body: { amount: number; reason: string; type?: CreditChange['type'] | undefined },
  now: number,
): CreditChange {
  const { amount, reason } = body;
  const type = body.type ?? 'topup';
  if (amount === 0) throw new ApiError(400, 'invalid_request', 'body.amount must not be 0');
  if (amount < 0 && type !== 'adjustment') {
    throw new ApiError(
      400,
      'invalid_request',
      `body.amount must be positive for a ${type}; take credits away with type adjustment`,
    );
  }
  if (!customer.credits) {
    throw new ApiError(
      409,
      'conflict',
      `Customer ${customer.id} spends no credits: give it credits terms first (PATCH {"credits": {}})`,
    );
  }
  return { type, amount, reason, ref: `crd_${randomBytes(12).toString('base64url')}`, at: now };
}

/**
 * A customer's credits: its balance, its ledger (paged, newest first) and changes by hand: top-ups,
 * grants and adjustments, each made once per Idempotency-Key. The limiter spends the same balance.
 */
export const customerCreditRoutes: FastifyPluginAsyncTypebox<
  AdminRouteOptions<'customerStore' | 'credits' | 'metrics' | 'webhooks' | 'now'>
> = async (app, { deps, idempotency }) => {
  const findCustomer = (id: string) => customerOf(deps, id);
  // A refill this read or change applied, an adjustment crossing a threshold: the same events as
  // the limiter's, named by the customer alone.
  const announce = (customer: CustomerRecord, before: number, after: number, refilled: number) =>
    deps.webhooks.onCredits(
      { customerId: customer.id, plan: customer.plan },
      { before, after, refilled },
      customer.credits?.refill?.amount ?? null,
    );

  app.get(
    '/admin/customers/:id/credits',
    { schema: { params: CustomerIdParams, response: { 200: CreditBalanceSchema, ...errors } } },
    async (request) => {
      const customer = await findCustomer(request.params.id);
      const now = deps.now();
      const rule = ruleOf(customer);
      const { balance, openHour, refilled } = await deps.credits.balance(customer.id, rule, now);
      announce(customer, balance, balance, refilled);
      const next = customer.credits ? refillPeriod(rule, now) : null;
      return {
        id: customer.id,
        credits: customer.credits ?? null,
        balance,
        openHour: openHourView(openHour),
        nextRefillAt: next ? iso(next.nextAt) : null,
      };
    },
  );

  app.get(
    '/admin/customers/:id/credits/ledger',
    {
      schema: {
        params: CustomerIdParams,
        querystring: CreditLedgerQuery,
        response: { 200: CreditLedgerPageSchema, ...errors },
      },
    },
    async (request) => {
      const customer = await findCustomer(request.params.id);
      const { limit, after } = request.query;
      // The balance first: it closes a past hour's spend into the ledger the page then shows.
      const { balance, openHour, refilled } = await deps.credits.balance(customer.id, ruleOf(customer), deps.now());
      announce(customer, balance, balance, refilled);
      const page = await ledgerPage(deps, customer.id, limit, after);
      return {
        id: customer.id,
        balance,
        openHour: openHourView(openHour),
        items: page.items.map(entryView),
        next: page.next,
      };
    },
  );

  app.post(
    '/admin/customers/:id/credits',
    {
      schema: {
        params: CustomerIdParams,
        body: CreditChangeSchema,
        response: { 201: CreditChangeViewSchema, ...idempotentErrors },
      },
    },
    async (request, reply) =>
      idempotency.run(request, reply, {
        plan: async () => {
          const customer = await findCustomer(request.params.id);
          const change = checkedChange(customer, request.body, deps.now());
          const { type, amount, reason, ref } = change;
          const body = { ref, customerId: customer.id, type, amount, reason, at: iso(change.at) };
          return { plan: { customer, change }, status: 201, body };
        },
        apply: async ({ customer, change }) => {
          const result = await deps.credits.add(customer.id, ruleOf(customer), change, deps.now());
          const before = result.balance - (result.outcome === 'added' ? change.amount : 0);
          announce(customer, before, result.balance, result.refilled);
          if (result.outcome === 'short') {
            throw new ApiError(
              409,
              'conflict',
              `The balance is ${result.balance}: an adjustment of ${change.amount} would take it below zero`,
            );
          }
        },
        made: ({ customer, change }) =>
          audit(deps, request.log, 'customer.credits', customer.id, {
            type: change.type,
            amount: change.amount,
            ref: change.ref,
          }),
      }),
  );
};
