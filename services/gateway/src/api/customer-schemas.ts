import { PLAIN_TEXT } from '@animal-store/common/plain-text.js';
import { Type } from 'typebox';
import { MAX_ANCHOR_DAY } from '../limits/billing-period.js';
import { perName } from '../limits/windows.js';
import {
  CreditTermsChangeSchema,
  CreditTermsSchema,
  LimitsSchema,
  NameSchema,
  PageQueryFields,
  PlanSchema,
  Timestamp,
  WindowUsageSchema,
} from './schemas.js';

/** The id the business knows the customer by: visible ASCII, as Stripe's and most CRMs' ids are. */
const ExternalIdSchema = Type.String({ minLength: 1, maxLength: 128, pattern: '^[\\x21-\\x7e]+$' });

/** Up to 50 string labels, as Stripe's metadata: names up to 40 characters, values up to 500. */
const MetadataSchema = Type.Record(
  Type.String({ minLength: 1, maxLength: 40, pattern: '^[A-Za-z0-9_.:-]+$' }),
  Type.String({ maxLength: 500, format: PLAIN_TEXT }),
  { maxProperties: 50 },
);

/** Checked further by billingProblem (a zone the runtime knows). */
const BillingInput = Type.Object(
  {
    anchorDay: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_ANCHOR_DAY })),
    timeZone: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const CreateCustomerSchema = Type.Object(
  {
    name: NameSchema,
    plan: PlanSchema,
    limits: Type.Optional(LimitsSchema),
    billing: Type.Optional(BillingInput),
    externalId: Type.Optional(ExternalIdSchema),
    metadata: Type.Optional(MetadataSchema),
    credits: Type.Optional(CreditTermsSchema),
  },
  { additionalProperties: false },
);

export const UpdateCustomerSchema = Type.Object(
  {
    name: Type.Optional(NameSchema),
    plan: Type.Optional(PlanSchema),
    limits: Type.Optional(Type.Union([LimitsSchema, Type.Null()])),
    billing: Type.Optional(BillingInput),
    externalId: Type.Optional(Type.Union([ExternalIdSchema, Type.Null()])),
    metadata: Type.Optional(Type.Union([MetadataSchema, Type.Null()])),
    credits: Type.Optional(CreditTermsChangeSchema),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const CustomerViewSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  plan: PlanSchema,
  /** In force: the plan's windows with the customer's own over them, shared by all its keys. */
  limits: LimitsSchema,
  /** The customer's own, when it has some: what a plan change would replace. */
  ownLimits: Type.Optional(LimitsSchema),
  billing: Type.Object({ anchorDay: Type.Integer(), timeZone: Type.String() }),
  /** The billing period in force now, in the customer's zone. */
  currentPeriod: Type.Object({ start: Timestamp, end: Timestamp }),
  externalId: Type.Optional(Type.String()),
  metadata: Type.Optional(Type.Record(Type.String(), Type.String())),
  /** Present when its keys spend credits: its terms (the balance: GET /admin/customers/:id/credits). */
  credits: Type.Optional(CreditTermsSchema),
  /**
   * The customer's own terms, when it has some; null when it turned its plan's off (it spends no
   * credits); absent when it follows its plan's (`credits` then shows them, if the plan has any).
   */
  ownCredits: Type.Optional(Type.Union([CreditTermsSchema, Type.Null()])),
  createdAt: Timestamp,
  updatedAt: Type.Optional(Timestamp),
});

/** GET /admin/customers/:id/usage: the customer's shared windows as the limiter counts them now. */
export const CustomerUsageSchema = Type.Object({
  id: Type.String(),
  plan: PlanSchema,
  /** In force: the windows all its keys share. */
  limits: LimitsSchema,
  billing: Type.Object({ anchorDay: Type.Integer(), timeZone: Type.String() }),
  /** Each shared window by name: what all its keys used together, and when it resets. */
  windows: Type.Object(perName(() => Type.Optional(WindowUsageSchema))),
});

export const CustomerPageSchema = Type.Object({
  items: Type.Array(CustomerViewSchema),
  /** Pass as `after` for the next page; null on the last. */
  next: Type.Union([Type.String(), Type.Null()]),
});

export const CustomerIdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

export const CustomerListQuery = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    plan: Type.Optional(PlanSchema),
    externalId: Type.Optional(ExternalIdSchema),
    ...PageQueryFields,
  },
  { additionalProperties: false },
);

export const DeleteCustomerQuery = Type.Object(
  { revokeKeys: Type.Optional(Type.Boolean({ default: false })) },
  { additionalProperties: false },
);
