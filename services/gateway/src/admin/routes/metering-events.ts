import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { errors } from '../../api/error-responses.js';
import { MeteringEventsPage, MeteringEventsQuery } from '../../api/metering-schemas.js';
import { cloudEvent, type StripeMeterEvent, stripeMeterEvent } from '../../metering/metering-event.js';
import { BadCursorError, type MeteringStore } from '../../metering/metering-store.js';
import type { AdminRouteOptions } from '../route-options.js';

export type MeteringEventsFormat = 'cloudevents' | 'stripe-meter-events';

/**
 * A page of the export after a cursor, as CloudEvents or Stripe meter events (those of subjects
 * without an externalId left out: Stripe has no customer for them; `next` passes them all the
 * same). Throws ApiError 400 for a cursor the export did not give. The route's answer, for a
 * caller in the same process (the reconciliation test) as for HTTP.
 */
export async function meteringEvents(
  store: MeteringStore,
  query: { after?: string; limit?: number; format?: MeteringEventsFormat },
  stripeEventName: string,
) {
  let page: Awaited<ReturnType<MeteringStore['read']>>;
  try {
    page = await store.read(query.after ?? null, query.limit ?? 100);
  } catch (err) {
    if (err instanceof BadCursorError) throw new ApiError(400, 'invalid_request', err.message);
    throw err;
  }
  const events =
    query.format === 'stripe-meter-events'
      ? page.records.map((r) => stripeMeterEvent(r, stripeEventName)).filter((e): e is StripeMeterEvent => e !== null)
      : page.records.map(cloudEvent);
  return { events, next: page.next };
}

/** GET /admin/metering/events?after=&limit=&format=: the closed hours, in the order they closed. */
export const meteringRoutes: FastifyPluginAsyncTypebox<
  AdminRouteOptions<'metering'> & { stripeEventName: string }
> = async (app, { deps, stripeEventName }) => {
  app.get(
    '/admin/metering/events',
    { schema: { querystring: MeteringEventsQuery, response: { 200: MeteringEventsPage, ...errors } } },
    async (request) => meteringEvents(deps.metering, request.query, stripeEventName),
  );
};
