import { ApiError, clipped } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyBaseLogger } from 'fastify';
import type { Static } from 'typebox';
import { Type } from 'typebox';
import { billingPeriod } from '../../customers/billing-period.js';
import { CustomerRuleError, checkNewCustomer, customerChanges } from '../../customers/customer-operations.js';
import { type CustomerRecord, type CustomerStore, DuplicateCustomerError } from '../../customers/customer-store.js';
import type { GatewayDeps } from '../../deps.js';
import { updateKey } from '../../keys/key-operations.js';
import { BadCursorError } from '../../paging/page.js';
import { limitsAfterChange, limitsFor, planProblem } from '../../plans/plans.js';
import { announceKeyChange } from '../../replicas/key-sync.js';
import {
  CreateCustomerSchema,
  CustomerIdParams,
  CustomerListQuery,
  CustomerPageSchema,
  CustomerViewSchema,
  DeleteCustomerQuery,
  UpdateCustomerSchema,
} from '../customer-schemas.js';
import { type AdminRouteOptions, audit, errors, idempotentErrors } from '../shared.js';

type CustomerView = Static<typeof CustomerViewSchema>;
type CustomerAction = 'customer.create' | 'customer.update' | 'customer.delete';

/** What an operator sees of a customer: its limits in force and the billing period it is in now. */
function customerView(deps: Pick<GatewayDeps, 'plans' | 'now'>, record: CustomerRecord): CustomerView {
  const period = billingPeriod(new Date(deps.now()), record.billing);
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
    createdAt: record.createdAt,
    ...(record.updatedAt ? { updatedAt: record.updatedAt } : {}),
  };
}

/** One audit line and one count per change to a customer; the line names fields, never values of metadata. */
function auditCustomer(
  deps: Pick<GatewayDeps, 'metrics'>,
  log: FastifyBaseLogger,
  action: CustomerAction,
  customerId: string,
  fields: Record<string, unknown> = {},
): void {
  deps.metrics.adminActions.inc({ action });
  log.info({ audit: action, customerId, ...fields }, `admin: ${action} ${customerId}`);
}

/** The store's and the rules' refusals as the API answers them. */
async function answering<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    if (err instanceof CustomerRuleError) throw new ApiError(400, 'invalid_request', err.message);
    if (err instanceof BadCursorError) throw new ApiError(400, 'invalid_request', `after: ${err.message}`);
    if (err instanceof DuplicateCustomerError && err.field === 'externalId') {
      throw new ApiError(409, 'conflict', 'Another customer already has this externalId');
    }
    throw err;
  }
}

async function findCustomer(store: CustomerStore, id: string): Promise<CustomerRecord> {
  const record = await store.get(id);
  if (!record) throw new ApiError(404, 'not_found', `No customer with id ${clipped(id)}`);
  return record;
}

/** A create that reached the store before its answer was lost is taken as made, not made twice. */
async function insertOnce(store: CustomerStore, record: CustomerRecord): Promise<void> {
  try {
    await store.insert(record);
  } catch (err) {
    if (!(err instanceof DuplicateCustomerError) || err.field !== 'id') throw err;
    const held = await store.get(record.id);
    if (held?.createdAt !== record.createdAt) throw err;
  }
}

/** Customers: the accounts above the keys. Create, list (paged, filtered), show, update, delete. */
export const customerRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions> = async (app, { deps, idempotency }) => {
  const store = deps.customerStore;

  /** Refuses a plan change one of the customer's keys could not make (a plan without windows, say). */
  async function checkKeysCanFollow(customerId: string, plan: string): Promise<void> {
    for (const key of await deps.keyStore.liveKeysOf(customerId)) {
      const limits = limitsAfterChange(deps.plans, key.plan, plan, undefined, key.limits);
      const problem = planProblem(deps.plans, plan, limits);
      if (problem)
        throw new ApiError(409, 'conflict', `Key ${key.id} of this customer cannot move to ${plan}: ${problem}`);
    }
  }

  /**
   * A customer's keys follow it to its new plan (the plan sits on the customer), each as a plan
   * change of its own: audited, announced to the replicas, own limits replaced by the plan's.
   */
  async function moveKeysToPlan(customer: CustomerRecord, log: FastifyBaseLogger): Promise<void> {
    for (const key of await deps.keyStore.liveKeysOf(customer.id)) {
      if (key.plan === customer.plan) continue;
      const moved = await updateKey(deps.plans, deps.keyStore, key, { plan: customer.plan }, deps.now());
      if (!moved) continue; // revoked meanwhile
      await announceKeyChange(deps, 'key-changed', key.id, log);
      audit(deps, log, 'update', key.id, {
        changed: ['plan'],
        from: key.plan,
        to: customer.plan,
        customerId: customer.id,
      });
    }
  }

  app.post(
    '/admin/customers',
    { schema: { body: CreateCustomerSchema, response: { 201: CustomerViewSchema, ...idempotentErrors } } },
    async (request, reply) =>
      idempotency.run(request, reply, {
        plan: async () => {
          const record = await answering(async () => checkNewCustomer(deps.plans, request.body, deps.now()));
          return { plan: record, status: 201, body: customerView(deps, record) };
        },
        apply: (record) => answering(() => insertOnce(store, record)),
        made: (record) =>
          auditCustomer(deps, request.log, 'customer.create', record.id, {
            plan: record.plan,
            ...(record.externalId !== undefined ? { externalId: record.externalId } : {}),
          }),
      }),
  );

  app.get(
    '/admin/customers',
    { schema: { querystring: CustomerListQuery, response: { 200: CustomerPageSchema, ...errors } } },
    async (request) => {
      const { limit, after, ...filter } = request.query;
      const page = await answering(() =>
        store.list(filter, { limit: limit ?? 50, ...(after !== undefined ? { after } : {}) }),
      );
      return { items: page.items.map((record) => customerView(deps, record)), next: page.next };
    },
  );

  app.get(
    '/admin/customers/:id',
    { schema: { params: CustomerIdParams, response: { 200: CustomerViewSchema, ...errors } } },
    async (request) => customerView(deps, await findCustomer(store, request.params.id)),
  );

  app.patch(
    '/admin/customers/:id',
    {
      schema: {
        params: CustomerIdParams,
        body: UpdateCustomerSchema,
        response: { 200: CustomerViewSchema, ...errors },
      },
    },
    async (request) => {
      const current = await findCustomer(store, request.params.id);
      const changes = await answering(async () => customerChanges(deps.plans, current, request.body));
      if (changes.plan !== undefined && changes.plan !== current.plan)
        await checkKeysCanFollow(current.id, changes.plan);
      const updated = await answering(() => store.update(current.id, changes, new Date(deps.now())));
      // Deleted between the read and the write.
      if (!updated) throw new ApiError(404, 'not_found', `No customer with id ${clipped(current.id)}`);
      const body = request.body;
      auditCustomer(deps, request.log, 'customer.update', updated.id, {
        changed: Object.keys(body).filter((field) => body[field as keyof typeof body] !== undefined),
        ...(body.plan !== undefined && body.plan !== current.plan ? { from: current.plan, to: body.plan } : {}),
      });
      if (updated.plan !== current.plan) await moveKeysToPlan(updated, request.log);
      return customerView(deps, updated);
    },
  );

  app.delete(
    '/admin/customers/:id',
    {
      schema: {
        params: CustomerIdParams,
        querystring: DeleteCustomerQuery,
        response: { 204: Type.Null(), ...errors },
      },
    },
    async (request, reply) => {
      const customer = await findCustomer(store, request.params.id);
      const keys = await deps.keyStore.liveKeysOf(customer.id);
      if (keys.length > 0 && !request.query.revokeKeys) {
        throw new ApiError(
          409,
          'conflict',
          `Customer ${customer.id} has ${keys.length} live key${keys.length === 1 ? '' : 's'}: revoke ${
            keys.length === 1 ? 'it' : 'them'
          } first, or delete with ?revokeKeys=true`,
        );
      }
      const at = new Date(deps.now());
      for (const key of keys) {
        if (await deps.keyStore.revoke(key.id, at)) {
          await announceKeyChange(deps, 'key-revoked', key.id, request.log);
          audit(deps, request.log, 'revoke', key.id, { customerId: customer.id });
        }
      }
      if (await store.delete(customer.id, at)) {
        auditCustomer(deps, request.log, 'customer.delete', customer.id, { revokedKeys: keys.length });
      }
      return reply.code(204).send(null);
    },
  );
};
