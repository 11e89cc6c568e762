import { PLAIN_TEXT } from '@animal-store/common/validation.js';
import { Type } from 'typebox';
import { MAX_GRACE_SECONDS } from '../keys/key-operations.js';
import { PLANS, type Plan } from '../plans.js';

// TypeBox 1 infers a union built from a mapped array as never: the schema is the same anyOf of
// consts, its static type the plan names.
const PlanSchema = Type.Unsafe<Plan>(Type.Union(PLANS.map((p) => Type.Literal(p))));
const Timestamp = Type.String({ format: 'date-time' });

const LimitsSchema = Type.Object(
  {
    perMinute: Type.Integer({ minimum: 1, maximum: 1_000_000_000 }),
    perDay: Type.Integer({ minimum: 1, maximum: 1_000_000_000 }),
  },
  { additionalProperties: false },
);

const NameSchema = Type.String({ minLength: 1, maxLength: 100, format: PLAIN_TEXT });

/** RFC 3339 text, checked by parseExpiry (real date, in the future) rather than by a format. */
const ExpiryInput = Type.String({ minLength: 1, maxLength: 64 });

export const CreateKeySchema = Type.Object(
  {
    plan: PlanSchema,
    name: Type.Optional(NameSchema),
    limits: Type.Optional(LimitsSchema),
    expiresAt: Type.Optional(ExpiryInput),
  },
  { additionalProperties: false },
);

export const UpdateKeySchema = Type.Object(
  {
    plan: Type.Optional(PlanSchema),
    name: Type.Optional(NameSchema),
    limits: Type.Optional(LimitsSchema),
    expiresAt: Type.Optional(Type.Union([ExpiryInput, Type.Null()])),
  },
  { additionalProperties: false },
);

export const RotateKeySchema = Type.Object(
  { gracePeriodSeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_GRACE_SECONDS })) },
  { additionalProperties: false },
);

const KeyFields = {
  id: Type.String(),
  name: Type.String(),
  plan: PlanSchema,
  limits: LimitsSchema,
  createdAt: Timestamp,
};

export const CreatedKeySchema = Type.Object({ ...KeyFields, key: Type.String(), expiresAt: Type.Optional(Timestamp) });

export const RotatedKeySchema = Type.Object({ ...KeyFields, key: Type.String(), previousKeyExpiresAt: Timestamp });

export const KeyViewSchema = Type.Object({
  ...KeyFields,
  prefix: Type.Optional(Type.String()),
  source: Type.Union([Type.Literal('store'), Type.Literal('file')]),
  expiresAt: Type.Optional(Timestamp),
  previousKeyExpiresAt: Type.Optional(Timestamp),
  updatedAt: Type.Optional(Timestamp),
  revokedAt: Type.Optional(Timestamp),
  bannedUntil: Type.Optional(Timestamp),
});

const WindowUsageSchema = Type.Object({
  limit: Type.Integer(),
  used: Type.Integer(),
  remaining: Type.Integer(),
  resetAt: Type.Union([Timestamp, Type.Null()]),
});

export const UsageSchema = Type.Object({
  id: Type.String(),
  plan: PlanSchema,
  limits: LimitsSchema,
  windows: Type.Object({ minute: WindowUsageSchema, day: WindowUsageSchema }),
  ban: Type.Union([Type.Object({ until: Timestamp }), Type.Null()]),
  refusals: Type.Integer(),
});

export const KeyIdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
