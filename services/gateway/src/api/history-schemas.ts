import { Type } from 'typebox';
import { CountFields, Timestamp } from './schemas.js';

/*
 * GET /admin/customers/:id/usage/history and /admin/keys/:id/usage/history: a subject's usage
 * over time, in the steps of its calendar (a customer's own; the UTC calendar with the 1st for a
 * key), each step with its own length.
 */

const Granularity = Type.Union([Type.Literal('hour'), Type.Literal('day'), Type.Literal('period')]);

export const HistoryQuery = Type.Object(
  {
    /** An instant (RFC 3339 with a zone), or a date of the subject's calendar (its local midnight). */
    from: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    to: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    /** The subject's billing period: `current` so far, or the whole `previous` one. */
    period: Type.Optional(Type.Union([Type.Literal('current'), Type.Literal('previous')])),
    /** Local hours (UTC hours unless the zone is a part-hour off UTC), days (23 to 25 hours), or billing periods. */
    granularity: Type.Optional(Granularity),
    format: Type.Optional(Type.Union([Type.Literal('json'), Type.Literal('csv')])),
  },
  { additionalProperties: false },
);

export const HistorySchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  granularity: Granularity,
  /** The calendar the days and periods are counted in. */
  billing: Type.Object({ anchorDay: Type.Integer(), timeZone: Type.String() }),
  from: Timestamp,
  to: Timestamp,
  retentionDays: Type.Integer(),
  totals: Type.Object(CountFields),
  /** Every step of [from, to), empty ones included, oldest first: a day may be 23 or 25 hours. */
  series: Type.Array(Type.Object({ start: Timestamp, end: Timestamp, ...CountFields })),
});
