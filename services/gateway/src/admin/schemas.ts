import { Type } from '@sinclair/typebox';
import { PLANS } from '../plans.js';

export const LimitsSchema = Type.Object(
  {
    perMinute: Type.Integer({ minimum: 1, maximum: 1_000_000_000 }),
    perDay: Type.Integer({ minimum: 1, maximum: 1_000_000_000 }),
  },
  { additionalProperties: false },
);

export const CreateKeySchema = Type.Object(
  {
    plan: Type.Union(PLANS.map((p) => Type.Literal(p))),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    limits: Type.Optional(LimitsSchema),
  },
  { additionalProperties: false },
);

const KeyFields = {
  id: Type.String(),
  name: Type.String(),
  plan: Type.Union(PLANS.map((p) => Type.Literal(p))),
  limits: LimitsSchema,
  createdAt: Type.String({ format: 'date-time' }),
};

export const CreatedKeySchema = Type.Object({ ...KeyFields, key: Type.String() });

export const KeyViewSchema = Type.Object({
  ...KeyFields,
  prefix: Type.Optional(Type.String()),
  source: Type.Union([Type.Literal('store'), Type.Literal('file')]),
  revokedAt: Type.Optional(Type.String({ format: 'date-time' })),
  bannedUntil: Type.Optional(Type.String({ format: 'date-time' })),
});

export const KeyIdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
