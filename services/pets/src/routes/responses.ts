import type { TSchema } from 'typebox';
import { ErrorRef } from '../schemas.js';

type HeaderDocs = Record<string, { type: 'string'; description: string }>;

/**
 * A response in fastify's content form: fastify serializes with `schema`, @fastify/swagger also
 * documents `description` and `headers`, which fastify itself ignores.
 */
export function json<S extends TSchema>(description: string, schema: S, headers?: HeaderDocs) {
  return { description, ...(headers ? { headers } : {}), content: { 'application/json': { schema } } };
}

export function error(description: string, headers?: HeaderDocs) {
  return json(description, ErrorRef, headers);
}

// Answered by the gateway, never by this service; listed because the spec lists them for every
// operation and the document declares the bearer scheme.
export const gatewayResponses = {
  401: error('The API key is missing or invalid (answered by the gateway).'),
  429: error('Rate limit exceeded (answered by the gateway); wait for Retry-After seconds.', {
    'Retry-After': { type: 'string', description: 'Seconds to wait before retrying.' },
  }),
};

export const unavailable = error('The pet store is unreachable; retry later.');
