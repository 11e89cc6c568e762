import { PLAIN_TEXT } from '@animal-store/common/plain-text.js';
import { Type } from 'typebox';
import { MAX_CREDITS, PLAN_CREDITS } from '../credits/credit-terms.js';
import { MAX_GRACE_SECONDS } from '../keys/key-operations.js';
import { perField, perName } from '../limits/windows.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../paging/page.js';
import { ALGORITHMS, SCOPES, type Scope } from '../plans/plans.js';
import { PlanPriceSchema } from './invoice-schemas.js';

/** A plan in force (PLANS_FILE decides which; planProblem says which when it is not one). */
export const PlanSchema = Type.String({ minLength: 1, maxLength: 32 });
export const Timestamp = Type.String({ format: 'date-time' });

const Limit = Type.Integer({ minimum: 1, maximum: 1_000_000_000 });

/** A key's own limits over its plan's windows (limits/windows.ts): any of them, at least one. */
export const LimitsSchema = Type.Object(
  perField(() => Type.Optional(Limit)),
  { additionalProperties: false, minProperties: 1 },
);

// TypeBox 1 infers a union built from a mapped array as never: the schema is the same anyOf of
// consts, its static type the scope names.
const ScopeSchema = Type.Unsafe<Scope>(Type.Union(SCOPES.map((scope) => Type.Literal(scope))));
const ScopesSchema = Type.Array(ScopeSchema, { uniqueItems: true, maxItems: SCOPES.length });
/** CIDRs, each checked and normalised by parseCidrs (a bare address is its /32 or /128). */
const CidrsSchema = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 100 });

export const NameSchema = Type.String({ minLength: 1, maxLength: 100, format: PLAIN_TEXT });

/**
 * A customer's or a lone key's credit terms: `{}` (a balance, topped up by hand) or with a refill
 * each billing period or day; checked further by creditTermsProblem.
 */
export const CreditTermsSchema = Type.Object(
  {
    refill: Type.Optional(
      Type.Object(
        {
          amount: Type.Integer({ minimum: 1, maximum: MAX_CREDITS }),
          every: Type.Union([Type.Literal('period'), Type.Literal('day')]),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

/**
 * A change of a customer's or a lone key's credit terms: terms of its own, `null` (none, even if
 * its plan has some) or `"plan"` (its own dropped: its plan's apply again). The balance and the
 * ledger stay whichever is given.
 */
export const CreditTermsChangeSchema = Type.Union([CreditTermsSchema, Type.Null(), Type.Literal(PLAN_CREDITS)], {
  description:
    'Credit terms of its own; null: none, even if its plan has some; "plan": its own dropped, so its plan\'s ' +
    'apply again (none if its plan has none). The balance and the ledger stay.',
});

/** RFC 3339 text, checked by parseExpiry (real date, in the future) rather than by a format. */
const ExpiryInput = Type.String({ minLength: 1, maxLength: 64 });

/** A customer's id; an unknown one is answered 400 naming the field. */
const CustomerRef = Type.String({ minLength: 1, maxLength: 64 });

export const CreateKeySchema = Type.Object(
  {
    /** Required unless customerId is given: a customer's keys are on its plan. */
    plan: Type.Optional(PlanSchema),
    customerId: Type.Optional(CustomerRef),
    name: Type.Optional(NameSchema),
    limits: Type.Optional(LimitsSchema),
    scopes: Type.Optional(ScopesSchema),
    allowedCidrs: Type.Optional(CidrsSchema),
    expiresAt: Type.Optional(ExpiryInput),
  },
  { additionalProperties: false },
);

export const UpdateKeySchema = Type.Object(
  {
    plan: Type.Optional(PlanSchema),
    name: Type.Optional(NameSchema),
    limits: Type.Optional(Type.Union([LimitsSchema, Type.Null()])),
    scopes: Type.Optional(Type.Union([ScopesSchema, Type.Null()])),
    allowedCidrs: Type.Optional(Type.Union([CidrsSchema, Type.Null()])),
    expiresAt: Type.Optional(Type.Union([ExpiryInput, Type.Null()])),
    /** Moves the key to this customer (and so to its plan); null: the key stands for itself. */
    customerId: Type.Optional(Type.Union([CustomerRef, Type.Null()])),
    /** A lone key's own credit terms; null: none, even if its plan has some; "plan": its plan's again. */
    credits: Type.Optional(CreditTermsChangeSchema),
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
  /** In force: the plan's windows with the key's own over them. */
  limits: LimitsSchema,
  /** In force: the key's own, else its plan's. */
  scopes: ScopesSchema,
  allowedCidrs: Type.Optional(CidrsSchema),
  /** The customer whose windows the key shares. */
  customerId: Type.Optional(Type.String()),
  /** A lone key that spends credits: the terms in force (its own, else its plan's). */
  credits: Type.Optional(CreditTermsSchema),
  /**
   * A lone key's own terms, when it has some; null when it turned its plan's off (it spends no
   * credits); absent when it follows its plan's, and for a key of a customer (it spends its customer's).
   */
  ownCredits: Type.Optional(Type.Union([CreditTermsSchema, Type.Null()])),
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

/** A page of keys, newest first (GET /admin/keys). */
export const KeyPageSchema = Type.Object({
  items: Type.Array(KeyViewSchema),
  /** Pass as `after` for the next page; null on the last. */
  next: Type.Union([Type.String(), Type.Null()]),
});

/** Page size and cursor, as GET /admin/customers takes them. */
export const PageQueryFields = {
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PAGE_SIZE, default: DEFAULT_PAGE_SIZE })),
  after: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
};

/** What GET /admin/keys narrows to, each answered by the store on an index. */
export const KeyListQuery = Type.Object(
  {
    /** Names starting with this, any case. */
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    /** Keys whose shown prefix (`ask_` and 6 characters) starts with this. */
    prefix: Type.Optional(Type.String({ minLength: 1, maxLength: 10, pattern: '^[0-9A-Za-z_]+$' })),
    plan: Type.Optional(PlanSchema),
    customerId: Type.Optional(CustomerRef),
    /** true: revoked keys only; false: live keys only; absent: both. */
    revoked: Type.Optional(Type.Boolean()),
    ...PageQueryFields,
  },
  { additionalProperties: false },
);

/** GET /admin/bans: how many of the bans in force to list, those ending first. */
export const BanListQuery = Type.Object(
  { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PAGE_SIZE, default: 50 })) },
  { additionalProperties: false },
);

/** The bans in force across every key: all of them counted, the first `limit` listed. */
export const BanListSchema = Type.Object({
  count: Type.Integer(),
  /** Soonest end first. A key no longer in the store (deleted since) has an empty name. */
  items: Type.Array(
    Type.Object({
      id: Type.String(),
      name: Type.String(),
      customerId: Type.Optional(Type.String()),
      bannedUntil: Timestamp,
    }),
  ),
});

export const WindowUsageSchema = Type.Object({
  limit: Type.Integer(),
  used: Type.Integer(),
  remaining: Type.Integer(),
  resetAt: Type.Union([Timestamp, Type.Null()]),
});

/** Window limits by name, as PLANS_FILE writes them. */
const WindowLimitsSchema = Type.Object(perName(() => Type.Optional(Type.Integer())));

export const PlansSchema = Type.Object({
  source: Type.String(),
  /** RATE_LIMIT_SHADOW: every plan refuses nothing. */
  shadow: Type.Boolean(),
  plans: Type.Array(
    Type.Object({
      name: Type.String(),
      /** Null: every key of the plan carries its own limits. */
      windows: Type.Union([WindowLimitsSchema, Type.Null()]),
      algorithm: Type.Unsafe<(typeof ALGORITHMS)[number]>(Type.Union(ALGORITHMS.map((a) => Type.Literal(a)))),
      scopes: ScopesSchema,
      shadow: Type.Boolean(),
      description: Type.Optional(Type.String()),
      /** What a billing period costs, in integer minor units of `currency`; absent when not priced. */
      price: Type.Optional(PlanPriceSchema),
      /** Credit terms of its customers and lone keys that have none of their own (credits.md). */
      credits: Type.Optional(CreditTermsSchema),
      /** The upstream statuses it bills, as PLANS_FILE lists them; absent: all but 502, 503 and 504. */
      billable: Type.Optional(Type.Array(Type.Union([Type.Integer(), Type.String()]))),
    }),
  ),
  routeCosts: Type.Record(Type.String(), Type.Integer()),
});

export const UsageSchema = Type.Object({
  id: Type.String(),
  plan: PlanSchema,
  limits: LimitsSchema,
  /** Each of the key's windows by name (second, minute, hour, day, month). */
  windows: Type.Object(perName(() => Type.Optional(WindowUsageSchema))),
  /**
   * A key of a customer: the customer, and the windows it shares with the customer's other keys
   * (each counts every key's requests; GET /admin/customers/:id/usage reads them alone).
   */
  customer: Type.Optional(
    Type.Object({ id: Type.String(), windows: Type.Object(perName(() => Type.Optional(WindowUsageSchema))) }),
  ),
  ban: Type.Union([Type.Object({ until: Timestamp }), Type.Null()]),
  refusals: Type.Integer(),
});

export const KeyIdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

export const CountFields = {
  admitted: Type.Integer(),
  /** Refused by a limit: 429 rate_limit_exceeded (in shadow mode, let through). */
  limited: Type.Integer(),
  /** Refused by a ban: 429 api_key_banned. */
  banned: Type.Integer(),
  /** Refused for want of credits: 402 credits_exhausted. Not in `refused`. */
  outOfCredits: Type.Integer(),
  /** limited + banned: the 429s. */
  refused: Type.Integer(),
  /** A scope or address the key lacks: 403, at no cost. */
  forbidden: Type.Integer(),
  /** The served requests' cost: what is billed. */
  units: Type.Integer(),
  /** Admitted, then not served: the pets service answered 502, 503 or 504. Counted against the limit, not billed. */
  upstreamFailed: Type.Integer(),
};

export const TopQuery = Type.Object(
  {
    window: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,3}[hd]$' })),
    sort: Type.Optional(
      Type.Union([
        Type.Literal('admitted'),
        Type.Literal('refused'),
        Type.Literal('units'),
        Type.Literal('forbidden'),
        Type.Literal('upstreamFailed'),
      ]),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
  },
  { additionalProperties: false },
);

export const TopSchema = Type.Object({
  window: Type.String(),
  from: Timestamp,
  to: Timestamp,
  sort: Type.String(),
  /** `keys` and `customers`: how many had requests in the window. */
  totals: Type.Object({ ...CountFields, keys: Type.Integer(), customers: Type.Integer() }),
  /** Totals per plan (each key under its plan now), the busiest first. */
  plans: Type.Array(Type.Object({ plan: Type.String(), keys: Type.Integer(), ...CountFields })),
  /** Every hour of the window across all keys, oldest first. */
  hours: Type.Array(Type.Object({ start: Timestamp, ...CountFields })),
  keys: Type.Array(
    Type.Object({
      id: Type.String(),
      name: Type.String(),
      plan: Type.String(),
      revoked: Type.Boolean(),
      ...CountFields,
    }),
  ) /**
   * The busiest customers, by the same sort: each the sum of its keys (a key counts toward the
   * customer it belonged to when it made the request). Name and plan as the customer has them now.
   */,
  customers: Type.Array(Type.Object({ id: Type.String(), name: Type.String(), plan: Type.String(), ...CountFields })),
});
