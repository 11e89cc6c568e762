import { HOUR_MS } from '../usage/usage-history.js';

/*
 * A closed hour of one customer (or of a key standing for itself) as the metering export gives
 * it: a CloudEvents 1.0 event in structured JSON (the shape OpenMeter ingests: specversion, id,
 * source, type, subject, time, data), or a Stripe meter event for businesses that push to Stripe.
 */

/** The CloudEvents `type` of every event: one meter in OpenMeter matches it. */
export const USAGE_EVENT_TYPE = 'com.animalstore.usage.reported';
/** The CloudEvents `source`: with `id`, unique per event (OpenMeter deduplicates on the pair). */
export const USAGE_EVENT_SOURCE = 'animal-store-gateway';

/** What the closer read for one subject's hour: the history's units and their split by route. */
export interface HourTotals {
  /** A customer id (`cus_…`) or, for a key without a customer, the key id. */
  subject: string;
  /** The hour's start, epoch ms (a UTC hour, or a local hour of a zone a part-hour off UTC). */
  hour: number;
  /** The history's billable units for the hour (admitted and served): what the invoice counts. */
  units: number;
  /** Units by route (`GET /v1/pets`); they sum to `units`. */
  routes: Record<string, number>;
  /** The customer's externalId when it has one (Stripe's customer id, for the Stripe view). */
  externalId?: string;
}

/** One revision of an hour as the store keeps it. */
export interface MeteringRecord extends HourTotals {
  /** 1 for the hour's first report; each late correction is the next. */
  revision: number;
  /** Units added since the previous revision (all of them in revision 1; below 0 for a cut). */
  delta: number;
  /** When the revision was recorded, epoch ms. */
  closedAt: number;
}

export interface CloudEvent {
  specversion: '1.0';
  id: string;
  source: typeof USAGE_EVENT_SOURCE;
  type: typeof USAGE_EVENT_TYPE;
  subject: string;
  time: string;
  datacontenttype: 'application/json';
  data: {
    units: number;
    delta: number;
    routes: Record<string, number>;
    hourStart: string;
    hourEnd: string;
    revision: number;
    externalId?: string;
  };
}

export interface StripeMeterEvent {
  event_name: string;
  identifier: string;
  payload: { stripe_customer_id: string; value: string };
  timestamp: number;
}

/**
 * The event's id: the same for the same subject, hour and revision whichever replica or page
 * gives it, so a consumer (OpenMeter, Stripe's `identifier`) drops a repeat. At most ~60
 * characters for the gateway's ids: under Stripe's 100.
 */
function meteringEventId(record: Pick<MeteringRecord, 'subject' | 'hour' | 'revision'>): string {
  return `${record.subject}/${new Date(record.hour).toISOString()}/${record.revision}`;
}

/**
 * The record as a CloudEvent. `units` is the hour's total in this revision and `delta` what it
 * adds to the revisions before: a meter that sums must sum `delta` (a revision restates the hour).
 */
export function cloudEvent(record: MeteringRecord): CloudEvent {
  return {
    specversion: '1.0',
    id: meteringEventId(record),
    source: USAGE_EVENT_SOURCE,
    type: USAGE_EVENT_TYPE,
    subject: record.subject,
    time: new Date(record.hour).toISOString(),
    datacontenttype: 'application/json',
    data: {
      units: record.units,
      delta: record.delta,
      routes: record.routes,
      hourStart: new Date(record.hour).toISOString(),
      hourEnd: new Date(record.hour + HOUR_MS).toISOString(),
      revision: record.revision,
      ...(record.externalId !== undefined ? { externalId: record.externalId } : {}),
    },
  };
}

/**
 * The record as a Stripe meter event, or null for a subject without an externalId (Stripe has
 * no customer to bill) and for a revision that moves units between routes only (delta 0: nothing
 * to add). Stripe sums meter events, so `value` is the revision's `delta`, as a string as Stripe
 * gives it; `timestamp` the hour's start in seconds.
 */
export function stripeMeterEvent(record: MeteringRecord, eventName: string): StripeMeterEvent | null {
  if (record.externalId === undefined || record.delta === 0) return null;
  return {
    event_name: eventName,
    identifier: meteringEventId(record),
    payload: { stripe_customer_id: record.externalId, value: String(record.delta) },
    timestamp: Math.floor(record.hour / 1000),
  };
}
