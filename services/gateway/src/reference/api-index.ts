/**
 * What GET /v1 answers: where to start. The address `npm start` prints is /v1, so it must say
 * something useful rather than 404. Keyless and limited per address, like /docs.
 */
export const API_INDEX = {
  name: 'Animal store API',
  authentication: 'Send your API key as "Authorization: Bearer <API_KEY>"',
  links: {
    docs: '/docs',
    openapi: '/v1/openapi.json',
    pets: '/v1/pets',
  },
} as const;

const link = (description: string) => ({ type: 'string', description });

/** JSON Schema of the index, for the route's response and the public OpenAPI document. */
export const API_INDEX_SCHEMA = {
  type: 'object',
  required: ['name', 'authentication', 'links'],
  properties: {
    name: { type: 'string' },
    authentication: { type: 'string', description: 'How to send an API key.' },
    links: {
      type: 'object',
      required: ['docs', 'openapi', 'pets'],
      properties: {
        docs: link('The API reference (HTML).'),
        openapi: link('This OpenAPI document.'),
        pets: link('The animals: list, filter by id or status, add.'),
      },
    },
  },
} as const;

/**
 * The index as an OpenAPI operation: keyless, so no security; only the per-address limit applies
 * (publicDocument adds the rate-limit headers to its responses).
 */
export const API_INDEX_OPERATION = {
  operationId: 'apiIndex',
  summary: 'Where to start',
  description:
    'Links to the reference, the OpenAPI document and the pets collection. Needs no API key; counts against ' +
    'the per-address limit for requests without a key, like this document and /docs, whether a key is sent or not.',
  tags: ['pets'],
  security: [],
  responses: {
    '200': {
      description: 'The index.',
      content: { 'application/json': { schema: API_INDEX_SCHEMA } },
    },
    '429': {
      description: 'Too many requests from this address (`rate_limit_exceeded`). Wait `Retry-After` seconds.',
      headers: { 'Retry-After': { $ref: '#/components/headers/Retry-After' } },
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    },
    // What any request can meet before a route answers it, this keyless one included.
    '4XX': {
      description:
        'The gateway refused the request before answering it: malformed (400 `invalid_request`), not sent ' +
        'in time (408 `request_timeout`) or with headers too large (431 `headers_too_large`).',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    },
  },
};
