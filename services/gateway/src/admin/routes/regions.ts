import { ApiError } from '@animal-store/common/errors.js';
import { type FastifyPluginAsyncTypebox, Type } from '@fastify/type-provider-typebox';
import { errors } from '../../api/error-responses.js';
import { UNAVAILABLE_RETRY_SECONDS } from '../../api/store-unavailable.js';
import type { AdminRouteOptions } from '../route-options.js';

const RegionsSchema = Type.Object(
  {
    region: Type.String({ description: 'This gateway’s region (REGION)' }),
    partitioned: Type.Boolean({
      description:
        'Whether this region enforces shares: a region known here has not been heard from for REGION_STALE_MS',
    }),
    share: Type.Number({
      description: 'The share of each window enforced while partitioned (REGION_SHARE, else 1 / the regions seen)',
    }),
    sharesInForce: Type.Integer({
      description: 'Windows (per key or customer) a share has bounded since the partition began',
    }),
    regions: Type.Array(
      Type.Object({
        region: Type.String(),
        lastSyncAgeMs: Type.Integer({ description: 'Milliseconds since this region’s last counts arrived here' }),
        partitioned: Type.Boolean({ description: 'Not heard from for longer than REGION_STALE_MS' }),
      }),
      { description: 'Every other region heard from since this gateway started, by name' },
    ),
  },
  { additionalProperties: false },
);

/**
 * The regions as this gateway sees them (docs/regions.md). 404 when the gateway is one region
 * (NATS_URL unset); 503 while NATS cannot be reached, since the view then says nothing current.
 */
export const regionRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions<'regions'>> = async (app, { deps }) => {
  app.get('/admin/regions', { schema: { response: { 200: RegionsSchema, ...errors } } }, async () => {
    const sync = deps.regions;
    if (!sync) throw new ApiError(404, 'not_found', 'This gateway is one region: NATS_URL is not set');
    const status = sync.status();
    if (!status.connected) {
      throw new ApiError(
        503,
        'store_unavailable',
        `NATS cannot be reached; this region enforces shares; retry in ${UNAVAILABLE_RETRY_SECONDS} s`,
        { 'retry-after': String(UNAVAILABLE_RETRY_SECONDS) },
      );
    }
    return {
      region: status.region,
      partitioned: status.partitioned,
      share: status.share,
      sharesInForce: status.sharesInForce,
      regions: status.regions.map((view) => ({ ...view, lastSyncAgeMs: Math.round(view.lastSyncAgeMs) })),
    };
  });
};
