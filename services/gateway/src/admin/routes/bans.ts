import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { errors } from '../../api/error-responses.js';
import { BanListQuery, BanListSchema } from '../../api/schemas.js';
import { iso } from '../../api/shared.js';
import { unavailable } from '../../api/store-unavailable.js';
import type { BanList } from '../../limits/key-limiter.js';
import type { AdminRouteOptions } from '../route-options.js';

/**
 * The bans in force across every key, from the limiter's index of them: how many, and those that
 * end first with the key's name and customer. Counting them reads no key store, so the count is
 * whole with a million keys.
 */
export const banRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions<'keyStore' | 'keyResolver' | 'limiter'>> = async (
  app,
  { deps },
) => {
  app.get(
    '/admin/bans',
    { schema: { querystring: BanListQuery, response: { 200: BanListSchema, ...errors } } },
    async (request) => {
      let bans: BanList;
      try {
        bans = await deps.limiter.bans(request.query.limit ?? 50);
      } catch (err) {
        request.log.error({ err }, 'cannot read the bans');
        throw unavailable('rate_limiter_unavailable', 'Cannot reach the rate limiter to read the bans');
      }
      const records = await Promise.all(
        bans.items.map(({ keyId }) => deps.keyResolver.fileRecord(keyId) ?? deps.keyStore.get(keyId)),
      );
      return {
        count: bans.count,
        items: bans.items.map(({ keyId, endsAt }, i) => {
          const record = records[i];
          return {
            id: keyId,
            name: record?.name ?? '',
            ...(record?.customerId ? { customerId: record.customerId } : {}),
            bannedUntil: iso(endsAt),
          };
        }),
      };
    },
  );
};
