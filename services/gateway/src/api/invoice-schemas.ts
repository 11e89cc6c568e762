import { Type } from 'typebox';

/*
 * A plan's price as GET /admin/plans shows it, and the answer of GET /admin/customers/:id/invoice-preview
 * and GET /admin/keys/:id/invoice-preview (a lone key's): every amount an integer in minor units of `currency`.
 */

// schemas.ts imports PlanPriceSchema from here: its Timestamp is restated, not imported, so neither waits on the other.
const Timestamp = Type.String({ format: 'date-time' });

export const PlanPriceSchema = Type.Object({
  currency: Type.String(),
  base: Type.Integer(),
  includedUnits: Type.Integer(),
  unitPrice: Type.Integer(),
  per: Type.Integer(),
});

export const InvoicePreviewQuery = Type.Object(
  {
    /** The billing period (a customer's, a lone key's UTC month): `current` so far (default), or the whole `previous` one. */
    period: Type.Optional(Type.Union([Type.Literal('current'), Type.Literal('previous')])),
    format: Type.Optional(Type.Union([Type.Literal('json'), Type.Literal('csv')])),
  },
  { additionalProperties: false },
);

const InvoiceLineSchema = Type.Object({
  line: Type.Union([Type.Literal('base'), Type.Literal('included'), Type.Literal('overage'), Type.Literal('credits')]),
  description: Type.String(),
  /** Units (1 for the base fee). */
  quantity: Type.Integer(),
  /** Overage: the units billed, rounded up to a whole `per`. */
  billedUnits: Type.Optional(Type.Integer()),
  unitPrice: Type.Optional(Type.Integer()),
  per: Type.Optional(Type.Integer()),
  amount: Type.Integer(),
});

export const InvoicePreviewSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  plan: Type.String(),
  period: Type.Union([Type.Literal('current'), Type.Literal('previous')]),
  from: Timestamp,
  to: Timestamp,
  /** The billable units of [from, to): the usage history's `totals.units` (the customer's, or the lone key's) for the same range. */
  units: Type.Integer(),
  /** Credits the customer's keys (or the lone key) spent in [from, to); null without credit terms. */
  creditsUsed: Type.Union([Type.Integer(), Type.Null()]),
  currency: Type.String(),
  lines: Type.Array(InvoiceLineSchema),
  total: Type.Integer(),
});
