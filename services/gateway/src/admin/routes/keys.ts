import { ApiError, clipped, ErrorSchema } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static } from '@sinclair/typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyBaseLogger } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { announceKeyChange } from '../key-sync.js';
import { createKey, newSecret } from '../keys/create-key.js';
import { parseExpiry, previousSecretEnds } from '../keys/expiry.js';
import type { KeyChanges, KeyRecord } from '../keys/key-store.js';
import type { WindowUsage } from '../limits/key-limiter.js';
import { limitsAfterChange, limitsFor, planProblem } from '../plans.js';
import {
  CreatedKeySchema,
  CreateKeySchema,
  DEFAULT_GRACE_SECONDS,
  KeyIdParams,
  KeyViewSchema,
  RotatedKeySchema,
  RotateKeySchema,
  UpdateKeySchema,
  UsageSchema,
} from './schemas.js';

type Source = 'store' | 'file';
type AdminAction = 'create' | 'update' | 'rotate' | 'revoke' | 'unban';

const errors = { 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema, 503: ErrorSchema };

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * The admin API's routes: create, list, show, update, rotate and revoke keys, read their live
 * usage, and lift bans. Every change evicts the key here and tells the other replicas.
 */
export const adminRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps }> = async (app, { deps }) => {
  /** One audit line and one count per change; the line names fields, never a secret. */
  function audit(log: FastifyBaseLogger, action: AdminAction, keyId: string, fields: Record<string, unknown> = {}) {
    deps.metrics.adminActions.inc({ action });
    log.info({ audit: action, keyId, ...fields }, `admin: ${action} ${keyId}`);
  }

  async function view(record: KeyRecord, source: Source): Promise<Static<typeof KeyViewSchema>> {
    let bannedUntil: number | null = null;
    try {
      bannedUntil = await deps.limiter.primary.banEndsAt(record.id);
    } catch {
      // Ban state is informative here; an unreachable Redis must not hide the key.
    }
    return {
      id: record.id,
      name: record.name,
      plan: record.plan,
      limits: limitsFor(record.plan, record.limits),
      createdAt: record.createdAt,
      source,
      ...(record.prefix ? { prefix: record.prefix } : {}),
      ...(record.expiresAt ? { expiresAt: record.expiresAt } : {}),
      ...(record.previous ? { previousKeyExpiresAt: record.previous.expiresAt } : {}),
      ...(record.updatedAt ? { updatedAt: record.updatedAt } : {}),
      ...(record.revokedAt ? { revokedAt: record.revokedAt } : {}),
      ...(bannedUntil ? { bannedUntil: iso(bannedUntil) } : {}),
    };
  }

  async function findKey(id: string): Promise<{ record: KeyRecord; source: Source }> {
    const fromFile = deps.keyResolver.fileRecord(id);
    if (fromFile) return { record: fromFile, source: 'file' };
    const record = await deps.keyStore.get(id);
    if (!record) throw new ApiError(404, 'not_found', `No key with id ${clipped(id)}`);
    return { record, source: 'store' };
  }

  /** A stored, unrevoked key: what update and rotate act on. */
  async function findLiveStoreKey(id: string, doing: string): Promise<KeyRecord> {
    const { record, source } = await findKey(id);
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
      audit(request.log, 'create', record.id, { plan, ...(record.expiresAt ? { expiresAt: record.expiresAt } : {}) });
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
      ...deps.keyResolver.fileRecords().map((r) => view(r, 'file')),
      ...stored.map((r) => view(r, 'store')),
    ]);
  });

  app.get(
    '/admin/keys/:id',
    { schema: { params: KeyIdParams, response: { 200: KeyViewSchema, ...errors } } },
    async (request) => {
      const { record, source } = await findKey(request.params.id);
      return view(record, source);
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
      audit(request.log, 'update', updated.id, {
        changed: fields,
        ...(body.plan !== undefined && body.plan !== current.plan ? { from: current.plan, to: body.plan } : {}),
      });
      return view(updated, 'store');
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
      audit(request.log, 'rotate', rotated.id, { previousKeyExpiresAt: previousExpiresAt });
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

  app.get(
    '/admin/keys/:id/usage',
    { schema: { params: KeyIdParams, response: { 200: UsageSchema, ...errors } } },
    async (request) => {
      const { record } = await findKey(request.params.id);
      const limits = limitsFor(record.plan, record.limits);
      let usage: Awaited<ReturnType<typeof deps.limiter.usage>>;
      try {
        usage = await deps.limiter.usage(record.id);
      } catch (err) {
        request.log.error({ err }, 'cannot read usage');
        throw new ApiError(503, 'rate_limiter_unavailable', 'Cannot reach the rate limiter to read usage; retry');
      }
      const window = (limit: number, w: WindowUsage) => ({
        limit,
        used: w.used,
        remaining: Math.max(0, limit - w.used),
        resetAt: w.resetAt === null ? null : iso(w.resetAt),
      });
      return {
        id: record.id,
        plan: record.plan,
        limits,
        windows: { minute: window(limits.perMinute, usage.minute), day: window(limits.perDay, usage.day) },
        ban: usage.banEndsAt === null ? null : { until: iso(usage.banEndsAt) },
        refusals: usage.refusals,
      };
    },
  );

  app.delete(
    '/admin/keys/:id',
    { schema: { params: KeyIdParams, response: { 204: Type.Null(), ...errors } } },
    async (request, reply) => {
      const { record, source } = await findKey(request.params.id);
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
        audit(request.log, 'revoke', record.id);
      }
      return reply.code(204).send(null);
    },
  );

  app.delete(
    '/admin/keys/:id/ban',
    { schema: { params: KeyIdParams, response: { 204: Type.Null(), ...errors } } },
    async (request, reply) => {
      const { record } = await findKey(request.params.id);
      try {
        await deps.limiter.liftBan(record.id);
      } catch (err) {
        request.log.error({ err }, 'cannot lift ban');
        throw new ApiError(503, 'rate_limiter_unavailable', 'Cannot reach the rate limiter to lift the ban; retry');
      }
      await deps.events.publish({ type: 'ban-lifted', id: record.id }).catch((err) => {
        request.log.warn({ err }, 'ban-lift event not published');
      });
      audit(request.log, 'unban', record.id);
      return reply.code(204).send(null);
    },
  );
};
