import { USAGE_READS_PER_MINUTE } from '../self-service/usage-reads.js';
import { SelfUsageSchema } from '../self-service/usage-schema.js';
import { gatewayResponses, type Json, type ResponseObject, withErrorExamples } from './openapi-responses.js';

/** A TypeBox schema as plain JSON Schema: no TypeBox symbols in the published document. */
const plain = (schema: unknown): Json => JSON.parse(JSON.stringify(schema)) as Json;

const errorContent = (examples: Record<string, { summary: string; value: Json }>) => ({
  'application/json': { schema: { $ref: '#/components/schemas/Error' }, examples },
});

/** What the document shows of a 200, for a key of a customer. */
const EXAMPLE = {
  key: {
    id: 'key_3kTq9w1LmZ',
    name: 'production',
    plan: 'pro',
    windows: { minute: { limit: 300, used: 12, remaining: 288, resetAt: '2026-11-27T10:21:00.000Z' } },
    ban: null,
    calendar: {
      timeZone: 'Europe/Paris',
      anchorDay: 15,
      dayResetsAt: '2026-11-27T23:00:00.000Z',
      monthResetsAt: '2026-12-14T23:00:00.000Z',
    },
    billingPeriod: { start: '2026-11-14T23:00:00.000Z', end: '2026-12-14T23:00:00.000Z', units: 1840 },
  },
  customer: {
    id: 'cus_8f2kq1x0c7w3z9ab',
    name: 'Acme',
    plan: 'pro',
    windows: { day: { limit: 10000, used: 2210, remaining: 7790, resetAt: '2026-11-27T23:00:00.000Z' } },
    billingPeriod: { start: '2026-11-14T23:00:00.000Z', end: '2026-12-14T23:00:00.000Z', units: 5012 },
    credits: { balance: 94988, nextRefillAt: '2026-12-14T23:00:00.000Z' },
  },
};

/** GET /v1/usage, relative to the base address. */
export const USAGE_PATH = '/usage';

/** The Usage schema, for components.schemas. */
export const USAGE_SCHEMA = plain(SelfUsageSchema);

/**
 * GET /v1/usage in the public document: needs a key (any scope), takes nothing from its windows,
 * so it carries no rate-limit headers; its own 429 is its read limit, never a quota or a ban.
 */
export function usageOperation(): Json {
  const gateway = gatewayResponses();
  const responses: Record<string, ResponseObject> = {
    '200': {
      description: 'The calling key’s usage, and its customer’s when it has one.',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Usage' }, example: EXAMPLE } },
    },
    '401': withErrorExamples('401', gateway['401'] as ResponseObject),
    '403': {
      description: 'The key is used from an address its owner did not allow (`ip_not_allowed`).',
      content: errorContent({
        ip_not_allowed: {
          summary: 'ip_not_allowed',
          value: { code: 'ip_not_allowed', message: 'This API key may not be used from 198.51.100.7', status: 403 },
        },
      }),
    },
    '429': {
      description: `More than ${USAGE_READS_PER_MINUTE} reads of the usage in a minute by one key (\`rate_limit_exceeded\`). Wait \`Retry-After\` seconds; the key's quotas are untouched and no ban counts it.`,
      headers: { 'Retry-After': { $ref: '#/components/headers/Retry-After' } },
      content: errorContent({
        rate_limit_exceeded: {
          summary: 'rate_limit_exceeded',
          value: {
            code: 'rate_limit_exceeded',
            message: `Usage may be read ${USAGE_READS_PER_MINUTE} times a minute per key; retry in 41 s. Your quotas are untouched.`,
            status: 429,
          },
        },
      }),
    },
    '503': {
      description:
        'The rate limiter or the usage history cannot be read (`rate_limiter_unavailable`), or the API key store ' +
        'cannot be asked (`upstream_unavailable`). Retry after `Retry-After` seconds.',
      headers: { 'Retry-After': { $ref: '#/components/headers/Retry-After' } },
      content: errorContent({
        rate_limiter_unavailable: {
          summary: 'rate_limiter_unavailable',
          value: {
            code: 'rate_limiter_unavailable',
            message: 'Cannot reach Redis to read usage; retry in 5 s',
            status: 503,
          },
        },
      }),
    },
    default: withErrorExamples('default', gateway.default as ResponseObject),
  };
  return {
    operationId: 'getUsage',
    summary: 'Your usage and quotas',
    description:
      "The calling key's windows (limit, used, remaining, reset) and ban, its customer's shared windows, " +
      'the units billed so far this billing period, as the usage history sums them, and, when credit terms are ' +
      "in force, the credit balance the key's requests spend and its next refill: its customer's " +
      '(`customer.credits`), or, for a key of no customer, its own (`key.credits`). Reading it costs nothing ' +
      `against any quota and counts toward no ban; it has a limit of its own, ${USAGE_READS_PER_MINUTE} reads a ` +
      'minute per key.',
    tags: ['usage'],
    responses,
  };
}
