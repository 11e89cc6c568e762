import type { HTTPMethods } from 'fastify';

/** What a key may do: read pets (GET, HEAD) and add them (POST). */
export const SCOPES = ['pets:read', 'pets:write'] as const;
export type Scope = (typeof SCOPES)[number];

/**
 * What the gateway forwards, by route template and method: the pets API, with the scope each
 * needs. Anything else under /v1 is the gateway's own 404, another method its own 405 whose Allow
 * lists only what works there, and metrics and logs name the template (`/v1/pets/:petId`), not a
 * wildcard. PLANS_FILE's routeCosts name these as `METHOD /url`.
 */
export const PROXIED_ROUTES: ReadonlyArray<{ url: string; method: HTTPMethods; scope: Scope }> = [
  { url: '/v1/pets', method: 'GET', scope: 'pets:read' },
  { url: '/v1/pets', method: 'POST', scope: 'pets:write' },
  { url: '/v1/pets/:petId', method: 'GET', scope: 'pets:read' },
];

/** `POST /v1/pets`: how routeCosts names a route. */
export function routeName(method: string, url: string): string {
  return `${method} ${url}`;
}
