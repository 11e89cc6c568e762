import { timingSafeEqual } from 'node:crypto';
import { errorHandling } from '@animal-store/common/error-handler.js';
import { ApiError, ErrorSchema } from '@animal-store/common/errors.js';
import { httpBasics, serverOptions } from '@animal-store/common/http.js';
import { createValidatorCompiler } from '@animal-store/common/validation.js';
import type { Static } from '@sinclair/typebox';
import { Type } from '@sinclair/typebox';
import Fastify, { type FastifyInstance } from 'fastify';
import type { GatewayConfig } from '../config.js';
import type { GatewayDeps } from '../deps.js';
import { generateApiKey, hashApiKey, keyPrefix, newKeyId } from '../keys/api-key.js';
import type { KeyRecord } from '../keys/key-store.js';
import { limitsFor, planProblem } from '../plans.js';
import { CreatedKeySchema, CreateKeySchema, KeyIdParams, KeyViewSchema } from './schemas.js';

function sameToken(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * The operators' API on its own listener (ADMIN_HOST/ADMIN_PORT), never the public one:
 * create, list, show and revoke keys, and lift bans. Every change reaches the other replicas
 * through the event bus.
 */
export async function buildAdminApp(config: GatewayConfig, deps: GatewayDeps): Promise<FastifyInstance> {
  const token = config.adminToken;
  if (!token) throw new Error('the admin API needs ADMIN_TOKEN');
  const app = Fastify(serverOptions({ serviceName: 'gateway-admin', logLevel: config.logLevel }));
  app.setValidatorCompiler(createValidatorCompiler());
  // Bodies are JSON only (415 otherwise); fastify would also accept text/plain, then fail validation with a 400.
  app.removeContentTypeParser('text/plain');
  await app.register(httpBasics);
  await app.register(errorHandling);

  app.addHook('onRequest', async (request) => {
    const match = /^Bearer +(\S+)$/i.exec(request.headers.authorization ?? '');
    if (!match?.[1] || !sameToken(match[1], token)) {
      throw new ApiError(401, 'unauthorized', 'Send the admin token as "Authorization: Bearer <ADMIN_TOKEN>"');
    }
  });

  async function view(record: KeyRecord, source: 'store' | 'file'): Promise<Static<typeof KeyViewSchema>> {
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
      ...(record.revokedAt ? { revokedAt: record.revokedAt } : {}),
      ...(bannedUntil ? { bannedUntil: new Date(bannedUntil).toISOString() } : {}),
    };
  }

  async function findKey(id: string): Promise<{ record: KeyRecord; source: 'store' | 'file' }> {
    const fromFile = deps.keys.fileRecord(id);
    if (fromFile) return { record: fromFile, source: 'file' };
    const record = await deps.keyStore.get(id);
    if (!record) throw new ApiError(404, 'not_found', `No key with id ${id}`);
    return { record, source: 'store' };
  }

  const errors = { 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema };

  app.post(
    '/admin/keys',
    { schema: { body: CreateKeySchema, response: { 201: CreatedKeySchema, ...errors } } },
    async (request, reply) => {
      const body = request.body as Static<typeof CreateKeySchema>;
      const problem = planProblem(body.plan, body.limits);
      if (problem) throw new ApiError(400, 'invalid_request', problem);
      const key = generateApiKey();
      const id = newKeyId();
      const record: KeyRecord = {
        id,
        name: body.name ?? id,
        plan: body.plan,
        ...(body.limits ? { limits: body.limits } : {}),
        sha256: hashApiKey(key),
        prefix: keyPrefix(key),
        createdAt: new Date(deps.now()).toISOString(),
      };
      await deps.keyStore.insert(record);
      request.log.info({ keyId: id, plan: record.plan }, 'key created');
      return reply.code(201).send({
        id,
        key,
        plan: record.plan,
        name: record.name,
        limits: limitsFor(record.plan, record.limits),
        createdAt: record.createdAt,
      });
    },
  );

  app.get('/admin/keys', { schema: { response: { 200: Type.Array(KeyViewSchema), ...errors } } }, async () => {
    const stored = await deps.keyStore.list();
    return Promise.all([
      ...deps.keys.fileRecords().map((r) => view(r, 'file')),
      ...stored.map((r) => view(r, 'store')),
    ]);
  });

  app.get(
    '/admin/keys/:id',
    { schema: { params: KeyIdParams, response: { 200: KeyViewSchema, ...errors } } },
    async (request) => {
      const { record, source } = await findKey((request.params as { id: string }).id);
      return view(record, source);
    },
  );

  app.delete(
    '/admin/keys/:id',
    { schema: { params: KeyIdParams, response: { 204: Type.Null(), ...errors } } },
    async (request, reply) => {
      const { record, source } = await findKey((request.params as { id: string }).id);
      if (source === 'file') {
        throw new ApiError(
          409,
          'conflict',
          `Key ${record.id} comes from API_KEYS_FILE; remove it there and roll the gateway`,
        );
      }
      if (!record.revokedAt) {
        await deps.keyStore.revoke(record.id, new Date(deps.now()));
        deps.keys.evict(record.id, record.sha256);
        await deps.events.publish({ type: 'key-revoked', id: record.id, sha256: record.sha256 }).catch((err) => {
          request.log.warn({ err }, 'revocation event not published; replicas learn of it by polling');
        });
        request.log.info({ keyId: record.id }, 'key revoked');
      }
      return reply.code(204).send();
    },
  );

  app.delete(
    '/admin/keys/:id/ban',
    { schema: { params: KeyIdParams, response: { 204: Type.Null(), ...errors } } },
    async (request, reply) => {
      const { record } = await findKey((request.params as { id: string }).id);
      try {
        await deps.limiter.liftBan(record.id);
      } catch (err) {
        request.log.error({ err }, 'cannot lift ban');
        throw new ApiError(503, 'rate_limiter_unavailable', 'Cannot reach the rate limiter to lift the ban; retry');
      }
      await deps.events.publish({ type: 'ban-lifted', id: record.id }).catch((err) => {
        request.log.warn({ err }, 'ban-lift event not published');
      });
      request.log.info({ keyId: record.id }, 'ban lifted');
      return reply.code(204).send();
    },
  );

  return app;
}
