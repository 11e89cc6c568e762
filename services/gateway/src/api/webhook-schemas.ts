import { PLAIN_TEXT } from '@animal-store/common/plain-text.js';
import { Type } from 'typebox';
import { WEBHOOK_EVENTS, type WebhookEventType } from '../webhooks/event-types.js';

const Timestamp = Type.String({ format: 'date-time' });

// As ScopeSchema in schemas.ts: an anyOf of consts whose static type is the event names.
const EventSchema = Type.Unsafe<WebhookEventType>(Type.Union(WEBHOOK_EVENTS.map((e) => Type.Literal(e))));
const EventsSchema = Type.Array(EventSchema, { minItems: 1, maxItems: WEBHOOK_EVENTS.length, uniqueItems: true });
/** Checked further by checkWebhookUrl (scheme, credentials, where it resolves). */
const UrlSchema = Type.String({ minLength: 1, maxLength: 2048 });
const DescriptionSchema = Type.String({ maxLength: 200, format: PLAIN_TEXT });

export const CreateWebhookSchema = Type.Object(
  { url: UrlSchema, events: EventsSchema, description: Type.Optional(DescriptionSchema) },
  { additionalProperties: false },
);

export const UpdateWebhookSchema = Type.Object(
  { url: Type.Optional(UrlSchema), events: Type.Optional(EventsSchema), description: Type.Optional(DescriptionSchema) },
  { additionalProperties: false, minProperties: 1 },
);

export const WebhookViewSchema = Type.Object({
  id: Type.String(),
  url: Type.String(),
  events: Type.Array(EventSchema),
  description: Type.String(),
  createdAt: Timestamp,
  updatedAt: Type.Optional(Timestamp),
  /** Until then the previous secret also signs (after a rotation). */
  previousSecretExpiresAt: Type.Optional(Timestamp),
  /** A delivery ran out of retries; cleared by the next one delivered. */
  failing: Type.Optional(Type.Object({ since: Timestamp, reason: Type.String() })),
});

/** Create's answer: the view and, this once, the signing secret. */
export const CreatedWebhookSchema = Type.Object({ ...WebhookViewSchema.properties, secret: Type.String() });

export const RotatedWebhookSecretSchema = Type.Object({
  id: Type.String(),
  secret: Type.String(),
  previousSecretExpiresAt: Timestamp,
});

export const PingSchema = Type.Object({ id: Type.String(), eventId: Type.String() });

export const DeliveryAttemptsSchema = Type.Array(
  Type.Object({
    at: Timestamp,
    eventId: Type.String(),
    event: Type.String(),
    attempt: Type.Integer(),
    statusCode: Type.Union([Type.Integer(), Type.Null()]),
    latencyMs: Type.Integer(),
    error: Type.Union([Type.String(), Type.Null()]),
    outcome: Type.Union([Type.Literal('delivered'), Type.Literal('retrying'), Type.Literal('failed')]),
  }),
);

export const WebhookIdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
