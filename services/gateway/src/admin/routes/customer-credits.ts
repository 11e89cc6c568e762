import { randomBytes } from 'node:crypto';
import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { CreditChange } from '../../credits/credit-ledger.js';
import { announceCredits, creditRuleOf, customerCredits, customerLedger } from '../../credits/customer-credits.js';
import type { CustomerRecord } from '../../customers/customer-store.js';
import { audit } from '../audit.js';
import {
  CreditBalanceSchema,
  CreditChangeSchema,
  CreditChangeViewSchema,
  CreditLedgerPageSchema,
  CreditLedgerQuery,
} from '../credit-schemas.js';
import { CustomerIdParams } from '../customer-schemas.js';
import { type AdminRouteOptions, errors, findCustomer, idempotentErrors, iso } from '../shared.js';

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
  app.get(
    '/admin/customers/:id/credits',
    { schema: { params: CustomerIdParams, response: { 200: CreditBalanceSchema, ...errors } } },
    async (request) => {
      const customer = await findCustomer(deps, request.params.id);
      const read = await customerCredits(deps, customer);
      return { id: customer.id, credits: customer.credits ?? null, ...read };
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
      const customer = await findCustomer(deps, request.params.id);
      const { limit, after } = request.query;
      return { id: customer.id, ...(await customerLedger(deps, customer, limit, after)) };
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
          const customer = await findCustomer(deps, request.params.id);
          const change = checkedChange(customer, request.body, deps.now());
          const { type, amount, reason, ref } = change;
          const body = { ref, customerId: customer.id, type, amount, reason, at: iso(change.at) };
          return { plan: { customer, change }, status: 201, body };
        },
        apply: async ({ customer, change }) => {
          const result = await deps.credits.add(customer.id, creditRuleOf(customer), change, deps.now());
          const before = result.balance - (result.outcome === 'added' ? change.amount : 0);
          announceCredits(deps, customer, before, result.balance, result.refilled);
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
