import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { type Static, Type } from 'typebox';
import { audit } from '../../api/audit.js';
import { errors, idempotentErrors } from '../../api/error-responses.js';
import {
  CreatedKeySchema,
  CreateKeySchema,
  KeyIdParams,
  KeyListQuery,
  KeyPageSchema,
  KeyViewSchema,
  UpdateKeySchema,
} from '../../api/schemas.js';
import { createdKey, findKey, findLiveStoreKey, keyView, managedInFile } from '../../api/shared.js';
import { keyOwnership } from '../../customers/key-ownership.js';
import type { GatewayDeps } from '../../deps.js';
import { insertOnce, type KeyUpdate, updateKey } from '../../keys/key-operations.js';
import { type ListedKey, pageOfKeys } from '../../keys/key-pages.js';
import { applying, newKey } from '../../keys/key-requests.js';
import type { KeyRecord } from '../../keys/key-store.js';
import { BadCursorError, DEFAULT_PAGE_SIZE, type Page } from '../../paging/page.js';
import type { Plan } from '../../plans/plans.js';
import { announceKeyChange } from '../../replicas/key-sync.js';
import type { AdminRouteOptions } from '../route-options.js';

const CHANGEABLE = ['plan', 'limits', 'scopes', 'allowedCidrs', 'name', 'expiresAt', 'customerId', 'credits'] as const;

/** The fields a PATCH changes; a 400 when it changes none. */
function fieldsToChange(body: Static<typeof UpdateKeySchema>): Array<(typeof CHANGEABLE)[number]> {
  const fields = CHANGEABLE.filter((f) => body[f] !== undefined);
  if (fields.length === 0) {
    throw new ApiError(
      400,
      'invalid_request',
      'Nothing to change: give one or more of plan, limits, scopes, allowedCidrs, name, expiresAt, customerId, credits',
    );
  }
  return fields;
}

/** A key update as the key rules see it once the customer rule (keyOwnership) has placed it. */
async function withOwner(
  deps: Pick<GatewayDeps, 'plans' | 'customerStore'>,
  current: KeyRecord,
  body: Static<typeof UpdateKeySchema>,
): Promise<KeyUpdate> {
  const { customerId: _, ...update } = body;
  const { plan } = await keyOwnership(deps.plans, deps.customerStore, current, body);
  return {
    ...update,
    ...(body.customerId !== undefined ? { customerId: body.customerId } : {}),
    ...(plan !== undefined && plan !== current.plan ? { plan: plan as Plan } : {}),
  };
}

/** Keys: create, list, show, update and revoke (rotate: key-rotate.ts). */
export const keyRoutes: FastifyPluginAsyncTypebox<
  AdminRouteOptions<
    'plans' | 'keyStore' | 'customerStore' | 'keyResolver' | 'limiter' | 'events' | 'metrics' | 'webhooks' | 'now'
  >
> = async (app, { deps, idempotency }) => {
  app.post(
    '/admin/keys',
    { schema: { body: CreateKeySchema, response: { 201: CreatedKeySchema, ...idempotentErrors } } },
    async (request, reply) =>
      idempotency.run(request, reply, {
        plan: async () => {
          const now = deps.now();
          const { key, record } = await applying(() => newKey(deps, request.body, now));
          return { plan: record, status: 201, body: createdKey(deps, record, key) };
        },
        apply: (record) => insertOnce(deps.keyStore, record),
        made: (record) =>
          audit(
            deps,
            request.log,
            'key.created',
            { keyId: record.id },
            {
              plan: record.plan,
              ...(record.customerId ? { customerId: record.customerId } : {}),
              ...(record.expiresAt ? { expiresAt: record.expiresAt } : {}),
            },
          ),
      }),
  );

  app.get(
    '/admin/keys',
    { schema: { querystring: KeyListQuery, response: { 200: KeyPageSchema, ...errors } } },
    async (request) => {
      const { limit, after, ...filter } = request.query;
      let page: Page<ListedKey>;
      try {
        const size = { limit: limit ?? DEFAULT_PAGE_SIZE, ...(after !== undefined ? { after } : {}) };
        page = await pageOfKeys(deps.keyStore, deps.keyResolver.fileRecords(), filter, size);
      } catch (err) {
        if (err instanceof BadCursorError) throw new ApiError(400, 'invalid_request', `after: ${err.message}`);
        throw err;
      }
      return {
        items: await Promise.all(page.items.map(({ record, source }) => keyView(deps, record, source))),
        next: page.next,
      };
    },
  );

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
      const fields = fieldsToChange(body);
      const current = await findLiveStoreKey(deps, request.params.id, 'change');
      const updated = await applying(async () =>
        updateKey(deps.plans, deps.keyStore, current, await withOwner(deps, current, body), deps.now()),
      );
      // Revoked between the read and the write.
      if (!updated) throw new ApiError(409, 'conflict', `Key ${current.id} was revoked`);
      await announceKeyChange(deps, 'key-changed', updated.id, request.log);
      audit(
        deps,
        request.log,
        'key.updated',
        { keyId: updated.id },
        {
          changed: fields,
          ...(updated.plan !== current.plan ? { from: current.plan, to: updated.plan } : {}),
          ...(updated.customerId !== current.customerId
            ? { fromCustomer: current.customerId ?? null, toCustomer: updated.customerId ?? null }
            : {}),
          // The terms as given: its own, null (none) or 'plan' (its own dropped, its plan's in force).
          ...(body.credits !== undefined ? { credits: body.credits } : {}),
        },
      );
      return keyView(deps, updated, 'store');
    },
  );

  app.delete(
    '/admin/keys/:id',
    { schema: { params: KeyIdParams, response: { 204: Type.Null(), ...errors } } },
    async (request, reply) => {
      const { record, source } = await findKey(deps, request.params.id);
      if (source === 'file') throw managedInFile(record.id, 'remove');
      if (!record.revokedAt) {
        await deps.keyStore.revoke(record.id, new Date(deps.now()));
        await announceKeyChange(deps, 'key-revoked', record.id, request.log);
        audit(deps, request.log, 'key.revoked', { keyId: record.id });
      }
      return reply.code(204).send(null);
    },
  );
};
