import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { announceKeyChange } from '../../key-sync.js';
import { createKey, newSecret } from '../../keys/create-key.js';
import { parseExpiry, previousSecretEnds } from '../../keys/expiry.js';
import type { KeyChanges, KeyRecord } from '../../keys/key-store.js';
import { limitsAfterChange, limitsFor, planProblem } from '../../plans.js';
import {
  CreatedKeySchema,
  CreateKeySchema,
  DEFAULT_GRACE_SECONDS,
  KeyIdParams,
  KeyViewSchema,
  RotatedKeySchema,
  RotateKeySchema,
  UpdateKeySchema,
} from '../schemas.js';
import { type AdminRouteOptions, audit, errors, findKey, keyView } from '../shared.js';

/** Keys: create, list, show, update, rotate and revoke. */
export const keyRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions> = async (app, { deps }) => {
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

  function expiryFrom(value: string, now: number): string {
    const parsed = parseExpiry(value, 'expiresAt', now);
    if (parsed.problem !== undefined) throw new ApiError(400, 'invalid_request', parsed.problem);
    return parsed.expiresAt;
  }

  app.post(
    '/admin/keys',
    { schema: { body: CreateKeySchema, response: { 201: CreatedKeySchema, ...errors } } },
    async (request, reply) => {
      const { plan, name, limits, expiresAt } = request.body;
      const problem = planProblem(plan, limits);
      if (problem) throw new ApiError(400, 'invalid_request', problem);
      const now = deps.now();
      const { key, record } = createKey(
        { plan, name, limits, expiresAt: expiresAt === undefined ? undefined : expiryFrom(expiresAt, now) },
        new Date(now),
      );
      await deps.keyStore.insert(record);
      audit(deps, request.log, 'create', record.id, {
        plan,
        ...(record.expiresAt ? { expiresAt: record.expiresAt } : {}),
      });
      return reply.code(201).send({
        id: record.id,
        key,
        plan: record.plan,
        name: record.name,
        limits: limitsFor(record.plan, record.limits),
        createdAt: record.createdAt,
        ...(record.expiresAt ? { expiresAt: record.expiresAt } : {}),
      });
    },
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
      const fields = (['plan', 'limits', 'name', 'expiresAt'] as const).filter((f) => body[f] !== undefined);
      if (fields.length === 0) {
        throw new ApiError(
          400,
          'invalid_request',
          'Nothing to change: give one or more of plan, limits, name, expiresAt',
        );
      }
      const current = await findLiveStoreKey(request.params.id, 'change');
      const plan = body.plan ?? current.plan;
      const limits = limitsAfterChange(plan, body.limits, current.limits);
      const problem = planProblem(plan, limits);
      if (problem) throw new ApiError(400, 'invalid_request', problem);
      const now = deps.now();
      const changes: KeyChanges = {
        ...(body.plan !== undefined ? { plan: body.plan } : {}),
        ...(body.name !== undefined ? { name: body.name } : {}),
        ...(limits ? { limits } : current.limits ? { limits: null } : {}),
        ...(body.expiresAt === null ? { expiresAt: null } : {}),
        ...(typeof body.expiresAt === 'string' ? { expiresAt: expiryFrom(body.expiresAt, now) } : {}),
      };
      const updated = await deps.keyStore.update(current.id, changes, new Date(now));
      // Revoked between the read and the write.
      if (!updated) throw new ApiError(409, 'conflict', `Key ${current.id} was revoked`);
      await announceKeyChange(deps, 'key-changed', updated.id, request.log);
      audit(deps, request.log, 'update', updated.id, {
        changed: fields,
        ...(body.plan !== undefined && body.plan !== current.plan ? { from: current.plan, to: body.plan } : {}),
      });
      return keyView(deps, updated, 'store');
    },
  );

  app.post(
    '/admin/keys/:id/rotate',
    {
      schema: { params: KeyIdParams, body: RotateKeySchema, response: { 200: RotatedKeySchema, ...errors } },
      // The body is optional: a bare POST rotates with the default grace.
      preValidation: (request, _reply, done) => {
        request.body ??= {};
        done();
      },
    },
    async (request) => {
      const current = await findLiveStoreKey(request.params.id, 'rotate');
      const now = deps.now();
      const grace = request.body.gracePeriodSeconds ?? DEFAULT_GRACE_SECONDS;
      const previousExpiresAt = previousSecretEnds(current.expiresAt, now, grace);
      const secret = newSecret();
      const rotated = await deps.keyStore.rotate(
        current.id,
        { sha256: secret.sha256, prefix: secret.prefix, previousExpiresAt },
        new Date(now),
      );
      if (!rotated) throw new ApiError(409, 'conflict', `Key ${current.id} was revoked`);
      await announceKeyChange(deps, 'key-changed', rotated.id, request.log);
      audit(deps, request.log, 'rotate', rotated.id, { previousKeyExpiresAt: previousExpiresAt });
      return {
        id: rotated.id,
        key: secret.key,
        plan: rotated.plan,
        limits: limitsFor(rotated.plan, rotated.limits),
        name: rotated.name,
        createdAt: rotated.createdAt,
        previousKeyExpiresAt: previousExpiresAt,
      };
    },
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
