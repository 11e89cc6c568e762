import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static } from 'typebox';
import { audit } from '../../api/audit.js';
import { idempotentErrors } from '../../api/error-responses.js';
import { KeyIdParams, RotatedKeySchema, RotateKeySchema } from '../../api/schemas.js';
import { findLiveStoreKey, keyRules } from '../../api/shared.js';
import { applyRotation, planRotation } from '../../keys/key-operations.js';
import { announceKeyChange } from '../../replicas/key-sync.js';
import type { AdminRouteOptions } from '../route-options.js';

/**
 * A new secret for a key; the old one keeps working for the grace period given, so clients can
 * switch without a refused request. Every replica forgets the key as it was.
 */
export const keyRotateRoutes: FastifyPluginAsyncTypebox<
  AdminRouteOptions<'plans' | 'keyStore' | 'keyResolver' | 'events' | 'metrics' | 'webhooks' | 'now'>
> = async (app, { deps, idempotency }) => {
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
          const current = await findLiveStoreKey(deps, request.params.id, 'rotate');
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
          audit(deps, request.log, 'key.rotated', { keyId: id }, { previousKeyExpiresAt: rotation.previousExpiresAt }),
      }),
  );
};
