import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { type Static, Type } from 'typebox';
import { KeyOwnershipError, ownerOf, planWithCustomer } from '../../customers/key-ownership.js';
import { createKey } from '../../keys/create-key.js';
import {
  applyRotation,
  checkNewKey,
  insertOnce,
  KeyRuleError,
  type KeyUpdate,
  planRotation,
  updateKey,
} from '../../keys/key-operations.js';
import type { KeyRecord } from '../../keys/key-store.js';
import { announceKeyChange } from '../../replicas/key-sync.js';
import {
  CreatedKeySchema,
  CreateKeySchema,
  KeyIdParams,
  KeyViewSchema,
  RotatedKeySchema,
  RotateKeySchema,
  UpdateKeySchema,
} from '../schemas.js';
import {
  type AdminRouteOptions,
  audit,
  createdKey,
  errors,
  findKey,
  idempotentErrors,
  keyRules,
  keyView,
} from '../shared.js';

/** Keys: create, list, show, update, rotate and revoke. */
export const keyRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions> = async (app, { deps, idempotency }) => {
  /** A stored, unrevoked key: what update and rotate act on. */
  async function findLiveStoreKey(id: string, doing: string): Promise<KeyRecord> {
    const { record, source } = await findKey(deps, id);
    if (source === 'file') {
      throw new ApiError(
        409,
        'conflict',
        `Key ${id} comes from API_KEYS_FILE; ${doing} it in that file (npm run keys -- … --file PATH) and roll the gateway`,
      );
    }
    if (record.revokedAt) throw new ApiError(409, 'conflict', `Key ${id} was revoked at ${record.revokedAt}`);
    return record;
  }

  /** Runs a key operation (keys/key-operations.ts), answering what its rules refuse with a 400. */
  async function applying<T>(operation: () => Promise<T>): Promise<T> {
    try {
      return await operation();
    } catch (err) {
      if (err instanceof KeyRuleError || err instanceof KeyOwnershipError) {
        throw new ApiError(400, 'invalid_request', err.message);
      }
      throw err;
    }
  }

  /**
   * A key update as the key rules see it once its customer is known: a key of a customer (its
   * own, or the one it moves to) is on that customer's plan, with limits no looser than its.
   */
  async function withOwner(current: KeyRecord, body: Static<typeof UpdateKeySchema>): Promise<KeyUpdate> {
    const customerId = body.customerId === undefined ? current.customerId : body.customerId;
    const { customerId: _, ...update } = body;
    const moves = body.customerId !== undefined ? { customerId: body.customerId } : {};
    if (customerId == null) return { ...update, ...moves };
    const customer = await ownerOf(deps.customerStore, customerId);
    const limits = body.limits === undefined ? current.limits : (body.limits ?? undefined);
    const plan = planWithCustomer(deps.plans, customer, { plan: body.plan, limits });
    return { ...update, ...moves, ...(plan !== current.plan ? { plan } : {}) };
  }

  app.post(
    '/admin/keys',
    { schema: { body: CreateKeySchema, response: { 201: CreatedKeySchema, ...idempotentErrors } } },
    async (request, reply) =>
      idempotency.run(request, reply, {
        plan: async () => {
          const now = deps.now();
          const { customerId } = request.body;
          const { key, record } = await applying(async () => {
            const customer = customerId === undefined ? null : await ownerOf(deps.customerStore, customerId);
            const plan = planWithCustomer(deps.plans, customer, request.body);
            if (plan === undefined) throw new KeyRuleError('plan is required (or customerId, for its plan)');
            const made = createKey(checkNewKey(deps.plans, { ...request.body, plan }, now), new Date(now));
            if (customer) made.record.customerId = customer.id;
            return made;
          });
          return { plan: record, status: 201, body: createdKey(deps, record, key) };
        },
        apply: (record) => insertOnce(deps.keyStore, record),
        made: (record) =>
          audit(deps, request.log, 'create', record.id, {
            plan: record.plan,
            ...(record.customerId ? { customerId: record.customerId } : {}),
            ...(record.expiresAt ? { expiresAt: record.expiresAt } : {}),
          }),
      }),
  );

  app.get('/admin/keys', { schema: { response: { 200: Type.Array(KeyViewSchema), ...errors } } }, async () => {
    const stored = await deps.keyStore.list();
    return Promise.all([
      ...deps.keyResolver.fileRecords().map((r) => keyView(deps, r, 'file')),
      ...stored.map((r) => keyView(deps, r, 'store')),
    ]);
  });

  app.get(
    '/admin/keys/:id',
    { schema: { params: KeyIdParams, response: { 200: KeyViewSchema, ...errors } } },
    async (request) => {
      const { record, source } = await findKey(deps, request.params.id);
      return keyView(deps, record, source);
    },
  );

  app.patch(
    '/admin/keys/:id',
    { schema: { params: KeyIdParams, body: UpdateKeySchema, response: { 200: KeyViewSchema, ...errors } } },
    async (request) => {
      const body = request.body;
      const fields = (['plan', 'limits', 'scopes', 'allowedCidrs', 'name', 'expiresAt', 'customerId'] as const).filter(
        (f) => body[f] !== undefined,
      );
      if (fields.length === 0) {
        throw new ApiError(
          400,
          'invalid_request',
          'Nothing to change: give one or more of plan, limits, scopes, allowedCidrs, name, expiresAt, customerId',
        );
      }
      const current = await findLiveStoreKey(request.params.id, 'change');
      const updated = await applying(async () => {
        const update = await withOwner(current, body);
        return updateKey(deps.plans, deps.keyStore, current, update, deps.now());
      });
      // Revoked between the read and the write.
      if (!updated) throw new ApiError(409, 'conflict', `Key ${current.id} was revoked`);
      await announceKeyChange(deps, 'key-changed', updated.id, request.log);
      audit(deps, request.log, 'update', updated.id, {
        changed: fields,
        ...(updated.plan !== current.plan ? { from: current.plan, to: updated.plan } : {}),
        ...(updated.customerId !== current.customerId
          ? { fromCustomer: current.customerId ?? null, toCustomer: updated.customerId ?? null }
          : {}),
      });
      return keyView(deps, updated, 'store');
    },
  );

  app.post(
    '/admin/keys/:id/rotate',
    {
      schema: { params: KeyIdParams, body: RotateKeySchema, response: { 200: RotatedKeySchema, ...idempotentErrors } },
      // The body is optional: a bare POST rotates with the default grace.
      preValidation: (request, _reply, done) => {
        request.body ??= {};
        done();
      },
    },
    async (request, reply) =>
      idempotency.run(request, reply, {
        plan: async () => {
          const current = await findLiveStoreKey(request.params.id, 'rotate');
          const at = deps.now();
          const { key, rotation } = planRotation(current, at, request.body.gracePeriodSeconds);
          const body: Static<typeof RotatedKeySchema> = {
            id: current.id,
            key,
            plan: current.plan,
            ...keyRules(deps, current),
            name: current.name,
            createdAt: current.createdAt,
            previousKeyExpiresAt: rotation.previousExpiresAt,
          };
          return { plan: { id: current.id, rotation, at }, status: 200, body };
        },
        apply: async ({ id, rotation, at }) => {
          const record = await applyRotation(deps.keyStore, id, rotation, at);
          if (!record) {
            const now = await deps.keyStore.get(id);
            if (!now || now.revokedAt) throw new ApiError(409, 'conflict', `Key ${id} was revoked`);
            throw new ApiError(409, 'conflict', `Key ${id} was rotated by another request meanwhile; rotate it again`);
          }
          await announceKeyChange(deps, 'key-changed', id, request.log);
        },
        made: ({ id, rotation }) =>
          audit(deps, request.log, 'rotate', id, { previousKeyExpiresAt: rotation.previousExpiresAt }),
      }),
  );

  app.delete(
    '/admin/keys/:id',
    { schema: { params: KeyIdParams, response: { 204: Type.Null(), ...errors } } },
    async (request, reply) => {
      const { record, source } = await findKey(deps, request.params.id);
      if (source === 'file') {
        throw new ApiError(
          409,
          'conflict',
          `Key ${record.id} comes from API_KEYS_FILE; remove it there and roll the gateway`,
        );
      }
      if (!record.revokedAt) {
        await deps.keyStore.revoke(record.id, new Date(deps.now()));
        await announceKeyChange(deps, 'key-revoked', record.id, request.log);
        audit(deps, request.log, 'revoke', record.id);
      }
      return reply.code(204).send(null);
    },
  );
};
