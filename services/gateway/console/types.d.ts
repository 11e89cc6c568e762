// The admin API's answers as the console reads them: the static types of the schemas the gateway
// checks its answers against (api/schemas.ts, api/customer-schemas.ts,
// api/customer-history-schemas.ts, api/webhook-schemas.ts, api/invoice-schemas.ts), from its build's declarations.
// JSDoc in the console's files imports them: `@type {import('./types.js').KeyView}`.

import type { CustomerHistorySchema } from '@animal-store/gateway/api/customer-history-schemas.js';
import type {
  CustomerPageSchema,
  CustomerUsageSchema,
  CustomerViewSchema,
} from '@animal-store/gateway/api/customer-schemas.js';
import type { InvoicePreviewSchema } from '@animal-store/gateway/api/invoice-schemas.js';
import type { LeakListSchema } from '@animal-store/gateway/api/leak-schemas.js';
import type {
  BanListSchema,
  CreatedKeySchema,
  HistorySchema,
  KeyPageSchema,
  KeyViewSchema,
  PlansSchema,
  RotatedKeySchema,
  TopSchema,
  UsageSchema,
} from '@animal-store/gateway/api/schemas.js';
import type {
  CreatedWebhookSchema,
  DeliveryAttemptsSchema,
  RotatedWebhookSecretSchema,
  WebhookViewSchema,
} from '@animal-store/gateway/api/webhook-schemas.js';
import type { Static } from 'typebox';

export type KeyView = Static<typeof KeyViewSchema>;
export type KeyPage = Static<typeof KeyPageSchema>;
export type CreatedKey = Static<typeof CreatedKeySchema>;
export type RotatedKey = Static<typeof RotatedKeySchema>;
export type Usage = Static<typeof UsageSchema>;
export type Plans = Static<typeof PlansSchema>;
export type History = Static<typeof HistorySchema>;
export type Top = Static<typeof TopSchema>;
export type BanList = Static<typeof BanListSchema>;
export type LeakList = Static<typeof LeakListSchema>;
export type WebhookView = Static<typeof WebhookViewSchema>;
export type CreatedWebhook = Static<typeof CreatedWebhookSchema>;
export type RotatedWebhookSecret = Static<typeof RotatedWebhookSecretSchema>;
export type DeliveryAttempts = Static<typeof DeliveryAttemptsSchema>;
export type CustomerView = Static<typeof CustomerViewSchema>;
export type CustomerPage = Static<typeof CustomerPageSchema>;
export type CustomerUsage = Static<typeof CustomerUsageSchema>;
export type CustomerHistory = Static<typeof CustomerHistorySchema>;
export type InvoicePreview = Static<typeof InvoicePreviewSchema>;
