import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AdminRouteOptions } from '../route-options.js';
import { banRoutes } from './bans.js';
import { customerCreditRoutes, keyCreditRoutes } from './credits.js';
import { customerUsageRoutes } from './customer-usage.js';
import { customerRoutes } from './customers.js';
import { customerInvoicePreviewRoutes, keyInvoicePreviewRoutes } from './invoice-preview.js';
import { keyBanRoutes } from './key-ban.js';
import { keyRotateRoutes } from './key-rotate.js';
import { keyUsageRoutes } from './key-usage.js';
import { keyRoutes } from './keys.js';
import { planRoutes } from './plans.js';
import { regionRoutes } from './regions.js';
import { usageRoutes } from './usage.js';
import { customerUsageHistoryRoutes, keyUsageHistoryRoutes } from './usage-history.js';
import { webhookDeliveryRoutes } from './webhook-deliveries.js';
import { webhookRoutes } from './webhooks.js';

/**
 * The admin API's routes, one file per resource, named for its URL: keys (create, list, show,
 * update, revoke), their rotation, their live usage and its history, their bans (each, and all in force), the usage of all
 * keys, the plans in force, webhook endpoints, customers, their shared windows, their usage history, their credits and their invoice preview (a lone key's too). Every change evicts the key here and tells the
 * other replicas.
 */
export const adminRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions> = async (app, opts) => {
  await app.register(keyRoutes, opts);
  await app.register(keyRotateRoutes, opts);
  await app.register(keyUsageRoutes, opts);
  await app.register(keyUsageHistoryRoutes, opts);
  await app.register(usageRoutes, opts);
  await app.register(keyBanRoutes, opts);
  await app.register(banRoutes, opts);
  await app.register(planRoutes, opts);
  await app.register(regionRoutes, opts);
  await app.register(webhookRoutes, opts);
  await app.register(webhookDeliveryRoutes, opts);
  await app.register(customerRoutes, opts);
  await app.register(customerUsageHistoryRoutes, opts);
  await app.register(customerUsageRoutes, opts);
  await app.register(customerCreditRoutes, opts);
  await app.register(keyCreditRoutes, opts);
  await app.register(customerInvoicePreviewRoutes, opts);
  await app.register(keyInvoicePreviewRoutes, opts);
};
