import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { audit } from '../api/audit.js';
import { KeyViewSchema, NameSchema, RotateKeySchema } from '../api/schemas.js';
import { createdKey, keyView } from '../api/shared.js';
import type { GatewayDeps } from '../deps.js';
import { insertOnce, rotateKey, updateKey } from '../keys/key-operations.js';
import { applying, newKey } from '../keys/key-requests.js';
import { maxKeysFor, SCOPES, type Scope, scopesFor } from '../plans/plans.js';
import { announceKeyChange } from '../replicas/key-sync.js';
import { liveKeysOf, ownCustomer, ownKey, signedIn } from './own-keys.js';

type Deps = Pick<
  GatewayDeps,
  | 'plans'
  | 'keyStore'
  | 'customerStore'
  | 'customerLocks'
  | 'keyResolver'
  | 'limiter'
  | 'events'
  | 'metrics'
  | 'webhooks'
  | 'now'
>;

const Scopes = Type.Array(Type.Union(SCOPES.map((s) => Type.Literal(s))), {
  uniqueItems: true,
  maxItems: SCOPES.length,
});
const Cidrs = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 100 });
const KeyId = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
const NewKey = Type.Object(
  {
    name: Type.Optional(NameSchema),
    scopes: Type.Optional(Scopes),
    allowedCidrs: Type.Optional(Cidrs),
    /** Only the signed-in customer's own: a key is never made for another (ownCustomer). */
    customerId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  },
  { additionalProperties: false },
);
const Narrowing = Type.Object(
  { scopes: Type.Optional(Scopes), allowedCidrs: Type.Optional(Type.Union([Cidrs, Type.Null()])) },
  { additionalProperties: false, minProperties: 1 },
);

/** Scopes a customer may give its key: its plan's, never more. */
function withinPlan(deps: Pick<GatewayDeps, 'plans'>, plan: string, scopes: readonly string[] | undefined): void {
  if (scopes === undefined) return;
  const allowed = scopesFor(deps.plans, plan);
  const beyond = scopes.filter((s) => !allowed.includes(s as Scope));
  if (beyond.length > 0) throw new ApiError(400, 'invalid_request', `Your plan does not include ${beyond.join(', ')}`);
}

/**
 * The signed-in customer's keys: list, create (up to its plan's maxKeys), rotate with a grace
 * period, revoke, narrow scopes and allowed addresses. Each change runs the admin API's rules
 * (keys/key-operations.ts, keys/key-requests.ts newKey), is announced to the replicas, audited
 * with the customer as actor and sent to the webhook endpoints as the admin's are.
 */
export const portalKeyRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.get('/portal/api/keys', async (request) => {
    const keys = await liveKeysOf(deps, signedIn(request));
    return { items: await Promise.all(keys.map((k) => keyView(deps, k.record, k.source))) };
  });

  app.post('/portal/api/keys', { schema: { body: NewKey } }, async (request, reply) => {
    const customerId = ownCustomer(request, request.body.customerId);
    const customer = await deps.customerStore.get(customerId);
    if (!customer) throw new ApiError(404, 'not_found', 'Your account is gone');
    withinPlan(deps, customer.plan, request.body.scopes);
    const max = maxKeysFor(deps.plans, customer.plan);
    // Count and insert under the customer's lock: two creates at once would both count max - 1.
    // Its keys from API_KEYS_FILE count too.
    const { key, record } = await deps.customerLocks.run(customerId, async () => {
      if ((await liveKeysOf(deps, customerId)).length >= max) {
        throw new ApiError(409, 'conflict', `Your ${customer.plan} plan allows ${max} live keys: revoke one first`);
      }
      const made = await applying(() => newKey(deps, { ...request.body, customerId }, deps.now()));
      await insertOnce(deps.keyStore, made.record);
      return made;
    });
    audit(deps, request.log, 'key.created', { keyId: record.id }, { plan: record.plan, customerId }, { customerId });
    return reply.code(201).send(createdKey(deps, record, key));
  });

  app.post(
    '/portal/api/keys/:id/rotate',
    {
      schema: { params: KeyId, body: RotateKeySchema },
      // A bare POST rotates with the default grace, as the admin route does.
      preValidation: (request, _reply, done) => {
        request.body ??= {};
        done();
      },
    },
    async (request) => {
      const current = await ownKey(deps, request, request.params.id, 'rotate');
      const rotated = await rotateKey(deps.keyStore, current, deps.now(), request.body.gracePeriodSeconds);
      if (!rotated) throw new ApiError(409, 'conflict', `Key ${current.id} changed meanwhile; try again`);
      await announceKeyChange(deps, 'key-changed', current.id, request.log);
      const ends = rotated.previousKeyExpiresAt;
      audit(
        deps,
        request.log,
        'key.rotated',
        { keyId: current.id },
        { previousKeyExpiresAt: ends },
        { customerId: signedIn(request) },
      );
      return { id: current.id, key: rotated.key, previousKeyExpiresAt: ends };
    },
  );

  app.patch(
    '/portal/api/keys/:id',
    { schema: { params: KeyId, body: Narrowing, response: { 200: KeyViewSchema } } },
    async (request) => {
      const current = await ownKey(deps, request, request.params.id, 'change');
      withinPlan(deps, current.plan, request.body.scopes);
      const changed = Object.keys(request.body);
      const updated = await applying(() => updateKey(deps.plans, deps.keyStore, current, request.body, deps.now()));
      if (!updated) throw new ApiError(409, 'conflict', `Key ${current.id} was revoked`);
      await announceKeyChange(deps, 'key-changed', updated.id, request.log);
      audit(deps, request.log, 'key.updated', { keyId: updated.id }, { changed }, { customerId: signedIn(request) });
      return keyView(deps, updated, 'store');
    },
  );

  app.delete('/portal/api/keys/:id', { schema: { params: KeyId } }, async (request, reply) => {
    const current = await ownKey(deps, request, request.params.id, 'revoke');
    if (await deps.keyStore.revoke(current.id, new Date(deps.now()))) {
      await announceKeyChange(deps, 'key-revoked', current.id, request.log);
      audit(deps, request.log, 'key.revoked', { keyId: current.id }, {}, { customerId: signedIn(request) });
    }
    return reply.code(204).send();
  });
};
