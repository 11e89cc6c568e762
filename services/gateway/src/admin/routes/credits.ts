import { randomBytes } from 'node:crypto';
import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { audit } from '../../api/audit.js';
import {
  CreditBalanceSchema,
  CreditChangeSchema,
  CreditChangeViewSchema,
  CreditLedgerPageSchema,
  CreditLedgerQuery,
} from '../../api/credit-schemas.js';
import { CustomerIdParams } from '../../api/customer-schemas.js';
import { errors, idempotentErrors } from '../../api/error-responses.js';
import { KeyIdParams } from '../../api/schemas.js';
import { findCustomer, findLoneKey, iso } from '../../api/shared.js';
import { type CreditRecord, creditOwnerOf } from '../../billing/credit-owner.js';
import type { CreditChange } from '../../credits/credit-ledger.js';
import type { CreditOwner } from '../../credits/credit-terms.js';
import { announceCredits, ownerCredits, ownerLedger } from '../../credits/owner-credits.js';
import type { GatewayDeps } from '../../deps.js';
import type { AdminRouteOptions } from '../route-options.js';

type Deps = Pick<
  GatewayDeps,
  'customerStore' | 'keyStore' | 'keyResolver' | 'plans' | 'credits' | 'metrics' | 'webhooks' | 'now'
>;

/** How an owner is named where it is found, changed and audited. */
const NAMES = {
  customer: { noun: 'Customer', field: 'customerId', patch: 'customers' },
  key: { noun: 'Key', field: 'keyId', patch: 'keys' },
} as const;

/**
 * A key's balance, when it has one of its own: a key of a customer spends its customer's, so its
 * credits are refused with 409 naming where they are.
 */
const loneKey = async (deps: Deps, id: string): Promise<CreditRecord> => ({
  kind: 'key',
  record: await findLoneKey(deps, id, 'spends its credits', 'credits'),
});

/** A change by hand as the ledger takes it, under a reference of its own; refused with 400 or 409. */
function checkedChange(
  owner: CreditOwner,
  body: { amount: number; reason: string; type?: CreditChange['type'] | undefined },
  now: number,
): CreditChange {
  const { amount, reason } = body;
  const type = body.type ?? 'topup';
  if (amount === 0) throw new ApiError(400, 'invalid_request', 'body.amount must not be 0');
  // Stryker disable next-line EqualityOperator: `<= 0` is the same test, 0 is refused just above
  if (amount < 0 && type !== 'adjustment') {
    throw new ApiError(
      400,
      'invalid_request',
      `body.amount must be positive for a ${type}; take credits away with type adjustment`,
    );
  }
  if (!owner.terms) {
    const { noun, patch } = NAMES[owner.kind];
    throw new ApiError(
      409,
      'conflict',
      `${noun} ${owner.id} spends no credits: give it credits terms first (PATCH /admin/${patch}/${owner.id} {"credits": {}})`,
    );
  }
  return { type, amount, reason, ref: `crd_${randomBytes(12).toString('base64url')}`, at: now };
}

/**
 * The three credit routes under `base` (a customer's, a lone key's): the balance, the ledger
 * (paged, newest first) and changes by hand (top-ups, grants, adjustments), each made once per
 * Idempotency-Key. One code path for both owners; only how the owner is found differs.
 */
function creditRoutes(
  base: '/admin/customers/:id' | '/admin/keys/:id',
  find: (deps: Deps, id: string) => Promise<CreditRecord>,
): FastifyPluginAsyncTypebox<AdminRouteOptions<keyof Deps>> {
  const params = base === '/admin/keys/:id' ? KeyIdParams : CustomerIdParams;
  return async (app, { deps, idempotency }) => {
    const recordOf = (request: FastifyRequest) => find(deps, (request.params as { id: string }).id);
    const ownerOf = async (request: FastifyRequest) => creditOwnerOf(deps.plans, await recordOf(request));

    app.get(
      `${base}/credits`,
      { schema: { params, response: { 200: CreditBalanceSchema, ...errors } } },
      async (request) => {
        const owner = await ownerOf(request);
        return { id: owner.id, credits: owner.terms ?? null, ...(await ownerCredits(deps, owner)) };
      },
    );

    app.get(
      `${base}/credits/ledger`,
      {
        schema: { params, querystring: CreditLedgerQuery, response: { 200: CreditLedgerPageSchema, ...errors } },
      },
      async (request) => {
        const owner = await ownerOf(request);
        const { limit, after } = request.query;
        return { id: owner.id, ...(await ownerLedger(deps, owner, limit, after)) };
      },
    );

    app.post(
      `${base}/credits`,
      {
        schema: {
          params,
          body: CreditChangeSchema,
          response: { 201: CreditChangeViewSchema, ...idempotentErrors },
        },
      },
      async (request, reply) =>
        idempotency.run(request, reply, {
          plan: async () => {
            const of = await recordOf(request);
            const owner = creditOwnerOf(deps.plans, of);
            const change = checkedChange(owner, request.body, deps.now());
            const { type, amount, reason, ref } = change;
            const body = { ref, [NAMES[owner.kind].field]: owner.id, type, amount, reason, at: iso(change.at) };
            return { plan: { of, change }, status: 201, body };
          },
          apply: async ({ of, change }) => {
            const owner = creditOwnerOf(deps.plans, of);
            const result = await deps.credits.add(owner.id, owner.rule, change, deps.now());
            const before = result.balance - (result.outcome === 'added' ? change.amount : 0);
            const exhausted = result.outcome === 'added' && result.exhausted ? { exhausted: { balance: 0 } } : {};
            const raisedTo = result.outcome !== 'short' && result.raisedTo ? { raisedTo: result.raisedTo } : {};
            announceCredits(deps, owner, {
              before,
              after: result.balance,
              refilled: result.refilled,
              ...exhausted,
              ...raisedTo,
            });
            if (result.outcome === 'short') {
              throw new ApiError(
                409,
                'conflict',
                `The balance is ${result.balance}: an adjustment of ${change.amount} would take it below zero`,
              );
            }
          },
          made: ({ of, change }) =>
            audit(
              deps,
              request.log,
              'credits.adjusted',
              of.kind === 'customer' ? { customer: of.record } : { keyId: of.record.id },
              {
                type: change.type,
                amount: change.amount,
                ref: change.ref,
              },
            ),
        }),
    );
  };
}

/** A customer's credits: the limiter spends the same balance for every key of the customer. */
export const customerCreditRoutes = creditRoutes('/admin/customers/:id', async (deps, id) => ({
  kind: 'customer',
  record: await findCustomer(deps, id),
}));

/** A lone key's credits (a key without a customer stands for itself); 409 for a customer's key. */
export const keyCreditRoutes = creditRoutes('/admin/keys/:id', loneKey);
