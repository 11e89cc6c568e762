import { ApiError, clipped } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { type Static, Type } from 'typebox';
import { audit } from '../../api/audit.js';
import {
  CreateCustomerSchema,
  CustomerIdParams,
  CustomerListQuery,
  CustomerPageSchema,
  CustomerViewSchema,
  DeleteCustomerQuery,
  UpdateCustomerSchema,
} from '../../api/customer-schemas.js';
import { customerView } from '../../api/customer-view.js';
import { errors, idempotentErrors } from '../../api/error-responses.js';
import { findCustomer } from '../../api/shared.js';
import { CustomerRuleError, checkNewCustomer, customerChanges } from '../../customers/customer-operations.js';
import { type CustomerRecord, type CustomerStore, DuplicateCustomerError } from '../../customers/customer-store.js';
import { FileCustomerError, FileCustomers } from '../../customers/file-customers.js';
import { BadCursorError, DEFAULT_PAGE_SIZE } from '../../paging/page.js';
import { announceCustomerChange } from '../../replicas/key-sync.js';
import { keysThatFollow, moveKeysToPlan, revokeKeysOf } from '../customer-keys.js';
import type { AdminRouteOptions } from '../route-options.js';

/** The store's and the rules' refusals as the API answers them. */
async function answering<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    if (err instanceof CustomerRuleError) throw new ApiError(400, 'invalid_request', err.message);
    if (err instanceof FileCustomerError) throw new ApiError(409, 'conflict', err.message);
    if (err instanceof BadCursorError) throw new ApiError(400, 'invalid_request', `after: ${err.message}`);
    if (err instanceof DuplicateCustomerError && err.field === 'externalId') {
      throw new ApiError(409, 'conflict', 'Another customer already has this externalId');
    }
    throw err;
  }
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

/** What an update's audit line and its event say: the fields given, the plan it moved from and to. */
function updateFields(current: CustomerRecord, body: Static<typeof UpdateCustomerSchema>): Record<string, unknown> {
  return {
    changed: Object.keys(body).filter((field) => body[field as keyof typeof body] !== undefined),
    ...(body.plan !== undefined && body.plan !== current.plan ? { from: current.plan, to: body.plan } : {}),
    // The terms as given: its own, null (none) or 'plan' (its own dropped, its plan's in force).
    ...(body.credits !== undefined ? { credits: body.credits } : {}),
  };
}

/** Customers: the accounts above the keys. Create, list (paged, filtered), show, update, delete. */
export const customerRoutes: FastifyPluginAsyncTypebox<
  AdminRouteOptions<
    | 'plans'
    | 'customerStore'
    | 'customerResolver'
    | 'keyStore'
    | 'keyResolver'
    | 'events'
    | 'metrics'
    | 'webhooks'
    | 'now'
  >
> = async (app, { deps, idempotency }) => {
  const store = deps.customerStore;

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
          audit(
            deps,
            request.log,
            'customer.created',
            { customer: record },
            {
              plan: record.plan,
              ...(record.externalId !== undefined ? { externalId: record.externalId } : {}),
            },
          ),
      }),
  );

  app.get(
    '/admin/customers',
    { schema: { querystring: CustomerListQuery, response: { 200: CustomerPageSchema, ...errors } } },
    async (request) => {
      const { limit, after, ...filter } = request.query;
      const page = await answering(() =>
        store.list(filter, { limit: limit ?? DEFAULT_PAGE_SIZE, ...(after !== undefined ? { after } : {}) }),
      );
      return { items: page.items.map((record) => customerView(deps, record)), next: page.next };
    },
  );

  app.get(
    '/admin/customers/:id',
    { schema: { params: CustomerIdParams, response: { 200: CustomerViewSchema, ...errors } } },
    async (request) => customerView(deps, await findCustomer(deps, request.params.id)),
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
      const current = await findCustomer(deps, request.params.id);
      const changes = await answering(async () => customerChanges(deps.plans, current, request.body));
      const followers =
        changes.plan !== undefined && changes.plan !== current.plan
          ? await keysThatFollow(deps, current.id, changes.plan)
          : // Stryker disable next-line ArrayDeclaration: read only after a plan change, which takes the branch above
            [];
      const updated = await answering(() => store.update(current.id, changes, new Date(deps.now())));
      // Deleted between the read and the write.
      if (!updated) throw new ApiError(404, 'not_found', `No customer with id ${clipped(current.id)}`);
      audit(deps, request.log, 'customer.updated', { customer: updated }, updateFields(current, request.body));
      await announceCustomerChange(deps, updated.id, request.log);
      // Stryker disable next-line ConditionalExpression: on the same plan there are no followers, and each key is on it
      if (updated.plan !== current.plan) await moveKeysToPlan(deps, updated, followers, request.log);
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
      const customer = await findCustomer(deps, request.params.id);
      // Before its keys are touched: the file, not the admin API, says what its customers are.
      if (store instanceof FileCustomers && store.declares(customer.id)) {
        throw new ApiError(409, 'conflict', new FileCustomerError(customer.id).message);
      }
      const at = new Date(deps.now());
      const revoked = await revokeKeysOf(deps, customer.id, request.query.revokeKeys === true, at, request.log);
      if (await store.delete(customer.id, at)) {
        audit(deps, request.log, 'customer.deleted', { customer }, { revokedKeys: revoked });
        await announceCustomerChange(deps, customer.id, request.log);
      }
      return reply.code(204).send(null);
    },
  );
};
