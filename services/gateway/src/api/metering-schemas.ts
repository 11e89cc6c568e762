import { Type } from 'typebox';
import { USAGE_EVENT_SOURCE, USAGE_EVENT_TYPE } from '../metering/metering-event.js';

/* GET /admin/metering/events: closed hours as CloudEvents, or as Stripe meter events. */

const METERING_PAGE_MAX = 1000;

export const MeteringEventsQuery = Type.Object(
  {
    /** The `next` of the page before; absent: from the first event kept. */
    after: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: METERING_PAGE_MAX, default: 100 })),
    format: Type.Optional(Type.Union([Type.Literal('cloudevents'), Type.Literal('stripe-meter-events')])),
  },
  { additionalProperties: false },
);

const Timestamp = Type.String({ format: 'date-time' });

const CloudEventSchema = Type.Object({
  specversion: Type.Literal('1.0'),
  id: Type.String(),
  source: Type.Literal(USAGE_EVENT_SOURCE),
  type: Type.Literal(USAGE_EVENT_TYPE),
  /** The customer id, or the key id of a key without a customer. */
  subject: Type.String(),
  /** The hour's start. */
  time: Timestamp,
  datacontenttype: Type.Literal('application/json'),
  data: Type.Object({
    /** The hour's billable units in this revision: the usage history's. */
    units: Type.Integer(),
    /** What this revision adds to the ones before (sum this one). */
    delta: Type.Integer(),
    routes: Type.Record(Type.String(), Type.Integer()),
    hourStart: Timestamp,
    hourEnd: Timestamp,
    revision: Type.Integer({ minimum: 1 }),
    externalId: Type.Optional(Type.String()),
  }),
});

const StripeMeterEventSchema = Type.Object({
  event_name: Type.String(),
  identifier: Type.String(),
  payload: Type.Object({ stripe_customer_id: Type.String(), value: Type.String() }),
  /** The hour's start, seconds since the epoch. */
  timestamp: Type.Integer(),
});

export const MeteringEventsPage = Type.Object({
  events: Type.Union([Type.Array(CloudEventSchema), Type.Array(StripeMeterEventSchema)]),
  /** Where the next page starts: pass it as `after`. Null only while nothing was ever closed. */
  next: Type.Union([Type.String(), Type.Null()]),
});
