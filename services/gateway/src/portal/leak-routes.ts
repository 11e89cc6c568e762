import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { GatewayDeps } from '../deps.js';
import { hashApiKey, sameSecret } from '../keys/api-key.js';
import { signedIn } from './own-keys.js';

type Deps = Pick<GatewayDeps, 'leaks' | 'keyStore' | 'now'>;

const LeakId = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

/**
 * The signed-in customer's leaked keys (docs/leaks.md, "What the customer sees"): each report,
 * what it did, the successor and the time left before the leaked secret stops; and, after a
 * rotation, the successor secret itself, given once.
 */
export const portalLeakRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.get('/portal/api/leaks', async (request) => {
    const leaks = await deps.leaks.ofCustomer(signedIn(request));
    const keys = new Map((await deps.keyStore.getMany([...new Set(leaks.map((l) => l.keyId))])).map((k) => [k.id, k]));
    const at = deps.now();
    return {
      items: leaks.map((l) => {
        const endsAt = l.leakedSecretEndsAt ? Date.parse(l.leakedSecretEndsAt) : undefined;
        return {
          id: l.id,
          keyId: l.keyId,
          keyName: keys.get(l.keyId)?.name ?? '',
          reportedAt: l.reportedAt,
          source: l.source,
          ...(l.url !== undefined ? { url: l.url } : {}),
          response: l.response,
          ...(l.successorPrefix ? { successorPrefix: l.successorPrefix } : {}),
          ...(l.leakedSecretEndsAt ? { leakedSecretEndsAt: l.leakedSecretEndsAt } : {}),
          // Whole seconds, never below 0: what the page counts down from.
          ...(endsAt !== undefined ? { secondsLeft: Math.max(0, Math.ceil((endsAt - at) / 1000)) } : {}),
        };
      }),
    };
  });

  app.post('/portal/api/leaks/:id/successor', { schema: { params: LeakId } }, async (request) => {
    const customerId = signedIn(request);
    const leak = (await deps.leaks.ofCustomer(customerId)).find((l) => l.id === request.params.id);
    // Another customer's leak and an unknown one read the same.
    const key = leak ? await deps.leaks.takeSuccessor(leak.id) : null;
    if (!leak || key === null) {
      throw new ApiError(404, 'not_found', 'No new secret to show: it was shown already, or its grace has ended');
    }
    // Rotated or revoked again since (the portal, an operator): that secret no longer opens anything.
    const record = await deps.keyStore.get(leak.keyId);
    if (!record || record.revokedAt || !sameSecret(record.sha256, hashApiKey(key))) {
      throw new ApiError(404, 'not_found', 'No new secret to show: the key was rotated or revoked since');
    }
    request.log.info(
      { audit: 'leak.successor_shown', keyId: leak.keyId, leakId: leak.id, actor: { customerId } },
      `portal: leak.successor-shown ${leak.keyId} by ${customerId}`,
    );
    return { keyId: leak.keyId, key };
  });
};
