import { PLAIN_TEXT } from '@animal-store/common/plain-text.js';
import { Type } from 'typebox';
import { MAX_CREDITS } from '../credits/credit-terms.js';
import { CreditTermsSchema, PageQueryFields, Timestamp } from './schemas.js';

/** POST /admin/customers/:id/credits and /admin/keys/:id/credits: a top-up (default), a grant, or an adjustment either way. */
export const CreditChangeSchema = Type.Object(
  {
    amount: Type.Integer({ minimum: -MAX_CREDITS, maximum: MAX_CREDITS }),
    reason: Type.String({ minLength: 1, maxLength: 500, format: PLAIN_TEXT }),
    type: Type.Optional(Type.Union([Type.Literal('topup'), Type.Literal('grant'), Type.Literal('adjustment')])),
  },
  { additionalProperties: false },
);

/** The change as made; `ref` is the reference it is kept under in the ledger (once, however retried). */
export const CreditChangeViewSchema = Type.Object({
  ref: Type.String(),
  /** Whose balance it changed: the customer's, or (keyId) a lone key's. */
  customerId: Type.Optional(Type.String()),
  keyId: Type.Optional(Type.String()),
  type: Type.Union([Type.Literal('topup'), Type.Literal('grant'), Type.Literal('adjustment')]),
  amount: Type.Integer(),
  reason: Type.String(),
  at: Timestamp,
});

const OpenHourSchema = Type.Union([
  Type.Object({ start: Timestamp, end: Timestamp, spent: Type.Integer() }),
  Type.Null(),
]);

/** GET /admin/customers/:id/credits, GET /admin/keys/:id/credits (id: the customer's or the key's). */
export const CreditBalanceSchema = Type.Object({
  id: Type.String(),
  /** The terms in force (its own, else its plan's); null when it spends none (a balance it had is still shown). */
  credits: Type.Union([CreditTermsSchema, Type.Null()]),
  balance: Type.Integer(),
  /** This hour's spend so far: in the balance, in the ledger once the hour has passed. */
  openHour: OpenHourSchema,
  /** When the next refill is due, with a refill in the terms. */
  nextRefillAt: Type.Union([Timestamp, Type.Null()]),
});

const CreditEntrySchema = Type.Object({
  id: Type.String(),
  type: Type.Union([
    Type.Literal('grant'),
    Type.Literal('topup'),
    Type.Literal('adjustment'),
    Type.Literal('refill'),
    Type.Literal('spend'),
    Type.Literal('refund'),
    /** The sum of the entries older than CREDITS_LEDGER_DAYS, carried forward: always the last. */
    Type.Literal('opening'),
  ]),
  amount: Type.Integer(),
  at: Timestamp,
  end: Type.Optional(Timestamp),
  period: Type.Optional(Type.String()),
  reason: Type.Optional(Type.String()),
  ref: Type.Optional(Type.String()),
});

/** GET /admin/customers/:id/credits/ledger: a page of entries, newest first. */
export const CreditLedgerPageSchema = Type.Object({
  id: Type.String(),
  balance: Type.Integer(),
  openHour: OpenHourSchema,
  items: Type.Array(CreditEntrySchema),
  /** Pass as `after` for the next page; null on the last. */
  next: Type.Union([Type.String(), Type.Null()]),
});

export const CreditLedgerQuery = Type.Object({ ...PageQueryFields }, { additionalProperties: false });
