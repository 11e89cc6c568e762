import { Type } from 'typebox';
import { Timestamp } from './schemas.js';

/** A proven leak as the admin API and the console show it: never a secret or a hash. */
export const LeakSchema = Type.Object(
  {
    id: Type.String(),
    keyId: Type.String(),
    customerId: Type.Optional(Type.String()),
    reporter: Type.Union([Type.Literal('github'), Type.Literal('manual')]),
    type: Type.Optional(Type.String()),
    source: Type.String(),
    url: Type.Optional(Type.String()),
    reportedAt: Timestamp,
    response: Type.Union([Type.Literal('notify'), Type.Literal('rotate'), Type.Literal('revoke')]),
    secret: Type.Union([Type.Literal('current'), Type.Literal('previous')]),
    leakedSecretEndsAt: Type.Optional(Timestamp),
    successorPrefix: Type.Optional(Type.String()),
  },
  { $id: 'Leak' },
);

/** POST /admin/leaks: a key found by hand, as the secret or its SHA-256, and where. */
export const LeakReportSchema = Type.Object(
  {
    key: Type.Optional(Type.String({ minLength: 1, maxLength: 1_000, description: 'The leaked key itself.' })),
    sha256: Type.Optional(
      Type.String({ pattern: '^[0-9a-f]{64}$', description: 'Hex SHA-256 of the leaked key, instead of the key.' }),
    ),
    source: Type.String({ minLength: 1, maxLength: 200, description: 'Where it was found: a ticket, a log…' }),
    url: Type.Optional(Type.String({ maxLength: 2_000 })),
  },
  { additionalProperties: false },
);

export const LeakListQuery = Type.Object(
  { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000, default: 50 })) },
  { additionalProperties: false },
);

export const LeakListSchema = Type.Object({ items: Type.Array(LeakSchema) });
