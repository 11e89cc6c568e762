import type { AddressInfo } from 'node:net';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import SwaggerParser from '@apidevtools/swagger-parser';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { RATE_LIMIT_HEADER_NAMES } from '../../src/gate/rate-limit-headers.js';
import { isOpenApi31, type OpenApiDocument, publicDocument } from '../../src/reference/openapi.js';
import { banRule, publicDocumentOptions } from '../../src/reference/openapi-description.js';
import { OpenApiSource, OpenApiUnavailable } from '../../src/reference/openapi-source.js';
import { addKey, bearer, startEchoUpstream, startGateway, type TestGateway } from '../support/helpers.js';

type Response = {
  description: string;
  headers?: Record<string, Record<string, unknown>>;
  content?: Record<string, { schema?: unknown; examples?: Record<string, { value: Record<string, unknown> }> }>;
};
type Operation = { operationId: string; security?: unknown[]; responses: Record<string, Response> };

const errorJson = { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } };

/** A small document shaped like the one the pets service generates. */
function petsLikeDoc(): OpenApiDocument {
  return {
    openapi: '3.1.0',
    info: { title: 'Animal store: pets', version: '1.0.0', description: 'The pets service.' },
    servers: [{ url: 'http://pets.internal:8090/v1' }],
    components: {
      schemas: {
        Error: {
          type: 'object',
          required: ['code', 'message', 'status'],
          additionalProperties: false,
          properties: { code: { type: 'string' }, message: { type: 'string' }, status: { type: 'integer' } },
        },
        Pet: {
          type: 'object',
          required: ['id', 'name', 'categoryId'],
          properties: {
            id: { type: 'integer', format: 'int64', minimum: 1 },
            name: { type: 'string', minLength: 1 },
            categoryId: { type: 'integer', format: 'int64' },
            status: { type: 'string', enum: ['available', 'pending', 'sold'] },
          },
        },
        Pets: { type: 'array', items: { $ref: '#/components/schemas/Pet' } },
      },
      responses: {
        NotFound: { description: 'No animal with that identifier exists.', content: errorJson },
      },
    },
    paths: {
      '/pets': {
        get: {
          operationId: 'listPets',
          summary: 'List animals',
          parameters: [{ in: 'query', name: 'limit', schema: { type: 'integer', minimum: 1, maximum: 100 } }],
          responses: {
            '200': {
              description: 'The list.',
              headers: { Link: { schema: { type: 'string' }, description: 'The next page.' } },
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Pets' } } },
            },
            '400': { description: 'Bad query.', content: errorJson },
          },
        },
        post: {
          operationId: 'createPet',
          summary: 'Add an animal',
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['name', 'categoryId'],
                  properties: { name: { type: 'string' }, categoryId: { type: 'integer' } },
                },
              },
            },
          },
          responses: {
            '201': {
              description: 'Added.',
              headers: { Location: { schema: { type: 'string' } } },
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Pet' } } },
            },
            '401': { description: 'Answered by the gateway.', content: errorJson },
          },
        },
      },
      '/pets/{petId}': {
        get: {
          operationId: 'getPet',
          deprecated: true,
          parameters: [{ in: 'path', name: 'petId', required: true, schema: { type: 'integer', format: 'int64' } }],
          responses: {
            '200': {
              description: 'The animal.',
              headers: { Deprecation: { schema: { type: 'string' } }, Sunset: { schema: { type: 'string' } } },
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Pet' } } },
            },
            '404': { $ref: '#/components/responses/NotFound' },
            '429': {
              description: 'Too many.',
              headers: { 'Retry-After': { schema: { type: 'string' } } },
              content: errorJson,
            },
          },
        },
      },
    },
  } as OpenApiDocument;
}

/** The operations the gateway forwards: all but its own keyless index (GET /v1) and usage (GET /v1/usage). */
function operations(doc: OpenApiDocument): Operation[] {
  return Object.values(doc.paths ?? {})
    .flatMap((item) => Object.values(item) as Operation[])
    .filter((op) => op.operationId !== 'apiIndex' && op.operationId !== 'getUsage');
}

describe('publicDocument', () => {
  const upstream = petsLikeDoc();
  const doc = publicDocument(upstream);

  it('declares the bearer scheme for every operation and is served from the gateway', () => {
    expect(doc.components?.securitySchemes?.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    // Without PUBLIC_BASE_URL: the /v1 of whichever gateway served it, paths relative to it.
    expect(doc.servers).toEqual([{ url: '/v1', description: expect.any(String) }]);
    expect(Object.keys(doc.paths ?? {})).toEqual(['/', '/usage', '/pets', '/pets/{petId}']);
    expect(JSON.stringify(doc)).not.toContain('pets.internal');
    expect(doc.info).toMatchObject({ title: 'Animal store API', version: '1.0.0' });
    expect(doc.info.description).toContain('| Free | 60 | 1,000 |');
    expect(doc.info.description).toContain('| Business | 1,000 | 100,000 |');
  });

  it("says a key's day and month follow its customer's billing calendar, and where GET /v1/usage shows it", () => {
    const text = doc.info.description ?? '';
    expect(text).not.toMatch(/reset at 00:00 UTC \(a month on the 1st\)/);
    expect(text).toMatch(
      /its day from midnight in the customer's time zone .*its month from the customer's anchor day/,
    );
    expect(text).toContain('a key of no customer counts the UTC day');
    expect(text).toContain('`key.calendar`');
    const schema = JSON.stringify(doc.components?.schemas?.Usage);
    for (const field of ['timeZone', 'anchorDay', 'dayResetsAt', 'monthResetsAt']) expect(schema).toContain(field);
  });

  it('gives every operation 401, 429 (with a required Retry-After), 502, 503, 504 and default in the Error shape', () => {
    const ops = operations(doc);
    expect(ops.map((op) => op.operationId).sort()).toEqual(['createPet', 'getPet', 'listPets']);
    for (const op of ops) {
      for (const status of ['401', '429', '502', '503', '504', 'default']) {
        expect(op.responses[status], `${op.operationId} ${status}`).toMatchObject({
          description: expect.any(String),
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        });
      }
      // Nothing beside the $ref: OpenAPI 3.1 would ignore it. The component says it is required.
      expect(op.responses['429']?.headers?.['Retry-After']).toEqual({ $ref: '#/components/headers/Retry-After' });
      expect(op.responses['503']?.headers?.['Retry-After']).not.toHaveProperty('required');
      expect(op.responses['401']?.description).toContain('missing_api_key');
      expect(op.responses['503']?.description).toContain('rate_limiter_unavailable');
    }
  });

  it('puts the rate-limit headers on every response of every operation, by reference', () => {
    const headers = doc.components?.headers ?? {};
    for (const name of [...RATE_LIMIT_HEADER_NAMES, 'Retry-After']) {
      expect(headers[name], name).toMatchObject({ description: expect.any(String), schema: expect.any(Object) });
    }
    let responses = 0;
    for (const op of operations(doc)) {
      for (const [status, response] of Object.entries(op.responses)) {
        responses++;
        for (const name of RATE_LIMIT_HEADER_NAMES) {
          expect(response.headers?.[name], `${op.operationId} ${status} ${name}`).toEqual({
            $ref: `#/components/headers/${name}`,
          });
        }
      }
    }
    // Eight gateway responses each (402 credits_exhausted among them), plus the pets service's
    // own: 200 and 400, 201, 200 and 404.
    expect(responses).toBe(3 * 8 + 2 + 1 + 2);
    expect(headers['Retry-After']).toMatchObject({ required: true });
  });

  it('keeps what the pets service documents: schemas, its own responses and their headers', () => {
    expect(doc.components?.schemas).toEqual({ ...upstream.components?.schemas, Usage: expect.any(Object) });
    const [list, create, get] = [
      doc.paths?.['/pets']?.get,
      doc.paths?.['/pets']?.post,
      doc.paths?.['/pets/{petId}']?.get,
    ] as Operation[];
    expect(list?.responses['200']?.headers?.Link).toEqual({
      schema: { type: 'string' },
      description: 'The next page.',
    });
    expect(list?.responses['400']).toMatchObject({
      description: 'Bad query.',
      content: { 'application/json': errorJson['application/json'] },
    });
    expect(create?.responses['201']?.headers?.Location).toEqual({ schema: { type: 'string' } });
    expect(get?.responses['200']?.headers?.Sunset).toEqual({ schema: { type: 'string' } });
    // A response by reference is copied in, so the headers added here belong to this operation.
    expect(get?.responses['404']).toMatchObject({ description: 'No animal with that identifier exists.' });
    expect(get?.responses['404']?.headers?.['X-RateLimit-Limit']).toBeDefined();
    expect(Object.keys(get?.responses ?? {})).toEqual([
      '200',
      '401',
      '402',
      '403',
      '404',
      '429',
      '502',
      '503',
      '504',
      'default',
    ]);
  });

  it('documents GET /v1, the index, as keyless and limited per address: a 429, the refusals, and the limit headers', () => {
    const index = doc.paths?.['/']?.get as Operation;
    expect(index.operationId).toBe('apiIndex');
    expect(index.security).toEqual([]);
    expect(Object.keys(index.responses)).toEqual(['200', '429', '4XX']);
    expect(index.responses['429']).toMatchObject({ content: errorJson });
    expect(index.responses['429']?.headers?.['Retry-After']).toEqual({ $ref: '#/components/headers/Retry-After' });
    for (const response of Object.values(index.responses)) {
      for (const name of RATE_LIMIT_HEADER_NAMES) {
        expect(response.headers?.[name], name).toEqual({ $ref: `#/components/headers/${name}` });
      }
    }
  });

  it('documents GET /v1/usage with the key, its Usage schema, its own 429 and no rate-limit headers', () => {
    const usage = doc.paths?.['/usage']?.get as Operation & { security?: unknown; tags: string[] };
    expect(usage.operationId).toBe('getUsage');
    expect(usage.security).toBeUndefined();
    expect(doc.tags).toContainEqual({ name: 'usage', description: expect.any(String) });
    expect(Object.keys(usage.responses)).toEqual(['200', '401', '403', '429', '503', 'default']);
    expect(usage.responses['200']?.content?.['application/json']?.schema).toEqual({
      $ref: '#/components/schemas/Usage',
    });
    const examples = (status: string) =>
      Object.keys(usage.responses[status]?.content?.['application/json']?.examples ?? {});
    expect(examples('429')).toEqual(['rate_limit_exceeded']);
    expect(examples('403')).toEqual(['ip_not_allowed']);
    expect(examples('401')).toEqual(['missing_api_key', 'invalid_api_key', 'expired_api_key']);
    expect(usage.responses['429']?.headers?.['Retry-After']).toEqual({ $ref: '#/components/headers/Retry-After' });
    for (const response of Object.values(usage.responses))
      expect(response.headers?.['X-RateLimit-Limit']).toBeUndefined();
  });

  it('names the codes each error response can carry, as examples in the Error shape', () => {
    const expected: Record<string, string[]> = {
      '400': ['invalid_request'],
      '401': ['missing_api_key', 'invalid_api_key', 'expired_api_key'],
      '402': ['credits_exhausted'],
      '403': ['insufficient_scope', 'ip_not_allowed'],
      '404': ['not_found'],
      '429': ['rate_limit_exceeded', 'api_key_banned'],
      '502': ['upstream_unavailable'],
      '503': ['rate_limiter_unavailable', 'upstream_unavailable', 'overloaded'],
      '504': ['upstream_timeout'],
      default: ['method_not_allowed', 'request_timeout', 'internal_error'],
    };
    let checked = 0;
    for (const op of operations(doc)) {
      for (const [status, response] of Object.entries(op.responses)) {
        if (status.startsWith('2')) continue;
        const examples = response.content?.['application/json']?.examples ?? {};
        expect(Object.keys(examples), `${op.operationId} ${status}`).toEqual(expected[status]);
        for (const [code, example] of Object.entries(examples)) {
          expect(example.value).toEqual({ code, message: expect.any(String), status: expect.any(Number) });
          if (status !== 'default') expect(example.value.status).toBe(Number(status));
        }
        checked++;
      }
    }
    expect(checked).toBe(3 * 8 + 1 + 1);
  });

  it('moves the paths of a pets service that documents them in full under the base address', () => {
    const { '/pets': list, '/pets/{petId}': get, ...rest } = petsLikeDoc().paths ?? {};
    expect(rest).toEqual({});
    const old = { ...petsLikeDoc(), servers: [{ url: '/' }], paths: { '/v1/pets': list, '/v1/pets/{petId}': get } };
    const moved = publicDocument(old as OpenApiDocument);
    expect(Object.keys(moved.paths ?? {})).toEqual(['/', '/usage', '/pets', '/pets/{petId}']);
    expect(moved.servers).toEqual(doc.servers);
  });

  it('lists the deployments, contact and license from the configuration, and links the document', () => {
    const config = loadConfig({
      PUBLIC_BASE_URL: 'https://api.animal-store.test/v1',
      STAGING_BASE_URL: 'https://staging.animal-store.test/v1',
      API_CONTACT_EMAIL: 'api@animal-store.test',
      API_LICENSE_URL: 'https://animal-store.test/terms',
    });
    const configured = publicDocument(upstream, publicDocumentOptions(config));
    expect(configured.servers).toEqual([
      { url: 'https://api.animal-store.test/v1', description: 'Production' },
      { url: 'https://staging.animal-store.test/v1', description: 'Staging' },
    ]);
    expect(configured.info.contact).toEqual({ name: 'Animal store API support', email: 'api@animal-store.test' });
    expect(configured.info.license).toEqual({ name: 'Proprietary', url: 'https://animal-store.test/terms' });
    expect(configured.info.description).toContain(
      '[https://api.animal-store.test/v1/openapi.json](https://api.animal-store.test/v1/openapi.json)',
    );
    // The defaults: the gateway's own /v1, and the document at its path there.
    expect(doc.info.contact).toEqual({ name: 'Animal store API support' });
    expect(doc.info.license).toEqual({ name: 'Proprietary', identifier: 'LicenseRef-Proprietary' });
    expect(doc.info.description).toContain('[/v1/openapi.json](/v1/openapi.json)');
  });

  it('states the ban rule with the configured numbers, and the deprecated operation with its successor', () => {
    const config = loadConfig({
      BAN_THRESHOLD: '5',
      BAN_WINDOW_SECONDS: '30',
      BAN_SECONDS: '600',
      RETRY_AFTER_MIN_SECONDS: '3',
    });
    const rule =
      'A refused request counts toward a ban until its `Retry-After` has passed (for at most 30 seconds): more ' +
      'than 5 counting at once ban the key for 10 minutes (429 `api_key_banned`). Up to 5 clients sharing a key ' +
      "are never banned while each waits out the `Retry-After` of its last 429. A 429's `Retry-After` is at least " +
      '3 seconds.';
    expect(banRule(config.ban)).toBe(rule);
    expect(publicDocument(upstream, publicDocumentOptions(config)).info.description).toContain(rule);
    expect(doc.info.description).toContain(
      'more than 50 counting at once ban the key for 15 minutes (429 `api_key_banned`). Up to 50 clients sharing ' +
        "a key are never banned while each waits out the `Retry-After` of its last 429. A 429's `Retry-After` is " +
        'at least 8 seconds.',
    );
    expect(banRule({ threshold: 1_000, windowMs: 120_000, durationMs: 90_000, graceMs: 0, minRetryAfterMs: 0 })).toBe(
      'A refused request counts toward a ban until its `Retry-After` has passed (for at most 2 minutes): more ' +
        'than 1,000 counting at once ban the key for 90 seconds (429 `api_key_banned`). Up to 1,000 clients ' +
        'sharing a key are never banned while each waits out the `Retry-After` of its last 429.',
    );
    expect(doc.info.description).toContain(
      '`GET /pets/{petId}` is deprecated and will be removed on 5 December 2030: use `GET /pets`',
    );
  });

  it('does not modify its input and gives the same document when applied twice', () => {
    expect(upstream).toEqual(petsLikeDoc());
    expect(publicDocument(doc)).toEqual(doc);
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    await expect(SwaggerParser.validate(structuredClone(petsLikeDoc()) as never)).resolves.toBeDefined();
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeDefined();
  });

  it('recognises an OpenAPI 3.1 document and nothing else', () => {
    expect(isOpenApi31(petsLikeDoc())).toBe(true);
    expect(isOpenApi31({ ...petsLikeDoc(), openapi: '3.0.3' })).toBe(false);
    expect(isOpenApi31({ openapi: '3.1.0', info: {} })).toBe(false);
    expect(isOpenApi31([])).toBe(false);
  });
});

/** An upstream serving a fixed document, counting requests; `mode` changes how it answers. */
async function startDocUpstream() {
  const state = { hits: 0, mode: 'ok' as 'ok' | 'error' | 'slow' };
  const app: FastifyInstance = Fastify();
  app.get('/v1/openapi.json', async (_request, reply) => {
    state.hits++;
    if (state.mode === 'error') return reply.code(500).send({ code: 'internal_error', message: 'x', status: 500 });
    if (state.mode === 'slow') await new Promise((resolve) => setTimeout(resolve, 1_000));
    return petsLikeDoc();
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, state, close: () => app.close() };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function docUpstream() {
  const upstream = await startDocUpstream();
  cleanups.push(upstream.close);
  return upstream;
}

async function gateway(upstream: string, env: Record<string, string> = {}): Promise<TestGateway> {
  const gw = await startGateway({ upstream, env });
  cleanups.push(() => gw.close());
  return gw;
}

function expectError(res: { statusCode: number; headers: Record<string, unknown>; body: string }, status: number) {
  expect(res.statusCode, res.body).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
  const body = JSON.parse(res.body);
  expect(body).toEqual({ code: expect.any(String), message: expect.any(String), status });
  return body.code as string;
}

describe('OpenApiSource', () => {
  it('keeps the document for the TTL, shares one fetch between callers, and serves the last one when the upstream fails', async () => {
    const upstream = await docUpstream();
    let now = 1_000_000;
    const errors: boolean[] = [];
    const source = new OpenApiSource({
      upstream: upstream.url,
      timeoutMs: 2_000,
      ttlMs: 60_000,
      now: () => now,
      onRefreshError: (_err, stale) => errors.push(stale),
    });
    const [a, b] = await Promise.all([source.get(), source.get()]);
    expect(a).toBe(b);
    expect(upstream.state.hits).toBe(1);
    now += 59_000;
    expect(await source.get()).toBe(a);
    expect(upstream.state.hits).toBe(1);
    now += 2_000;
    upstream.state.mode = 'error';
    expect(await source.get()).toBe(a);
    expect(upstream.state.hits).toBe(2);
    expect(errors).toEqual([true]);
    upstream.state.mode = 'ok';
    const fresh = await source.get();
    expect(fresh).not.toBe(a);
    expect(fresh).toEqual(a);
    expect(upstream.state.hits).toBe(3);
  });

  it('fails with the Error body when nothing is cached', async () => {
    const source = new OpenApiSource({ upstream: 'http://127.0.0.1:9', timeoutMs: 2_000 });
    const err = await source.get().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenApiUnavailable);
    expect((err as OpenApiUnavailable).body).toMatchObject({ status: 503, code: 'upstream_unavailable' });
  });
});

function expectAddressLimitHeaders(res: { headers: Record<string, unknown> }, remaining: number, label = '') {
  expect(res.headers['x-ratelimit-limit'], label).toBe('60');
  expect(res.headers['x-ratelimit-remaining'], label).toBe(String(remaining));
  expect(res.headers['x-ratelimit-reset'], label).toMatch(/^\d+$/);
  expect(res.headers.ratelimit, label).toMatch(new RegExp(`^"anonymous";r=${remaining};t=\\d+$`));
  expect(res.headers['ratelimit-policy'], label).toBe('"anonymous";q=60;w=60');
}

describe('GET /v1/openapi.json on the gateway', () => {
  it('serves the public document without a key', async () => {
    const upstream = await docUpstream();
    const gw = await gateway(upstream.url);
    const res = await gw.app.inject({ url: '/v1/openapi.json' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const doc = res.json() as OpenApiDocument;
    expect(
      operations(doc)
        .map((op) => op.operationId)
        .sort(),
    ).toEqual(['createPet', 'getPet', 'listPets']);
    expect(doc.components?.securitySchemes?.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeDefined();
    // The proxy still owns the rest of /v1.
    expect((await gw.app.inject({ url: '/v1/pets' })).statusCode).toBe(401);
  });

  it('answers GET /v1 without a key with an index pointing at /docs and /v1/pets', async () => {
    const upstream = await docUpstream();
    const gw = await gateway(upstream.url);
    const res = await gw.app.inject({ url: '/v1' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ links: { docs: '/docs', openapi: '/v1/openapi.json', pets: '/v1/pets' } });
    // Listed in the public document it serves.
    const doc = (await gw.app.inject({ url: '/v1/openapi.json' })).json() as OpenApiDocument;
    expect(doc.paths?.['/']?.get).toMatchObject({ operationId: 'apiIndex', security: [] });
    // GET / under the base address /v1 is what a generated client sends: /v1/.
    const slash = await gw.app.inject({ url: '/v1/' });
    expect(slash.statusCode, slash.body).toBe(200);
    expect(slash.json()).toEqual(res.json());
  });

  it('serves the configured deployments and ban numbers, at /v1/openapi.json and to the /docs page', async () => {
    const upstream = await docUpstream();
    const gw = await gateway(upstream.url, {
      PUBLIC_BASE_URL: 'https://api.animal-store.test/v1',
      STAGING_BASE_URL: 'https://staging.animal-store.test/v1',
      BAN_THRESHOLD: '4',
      BAN_WINDOW_SECONDS: '20',
      BAN_SECONDS: '120',
    });
    const doc = (await gw.app.inject({ url: '/v1/openapi.json' })).json() as OpenApiDocument;
    expect(doc.servers?.map((server) => server.url)).toEqual([
      'https://api.animal-store.test/v1',
      'https://staging.animal-store.test/v1',
    ]);
    expect(doc.info.description).toContain(
      'A refused request counts toward a ban until its `Retry-After` has passed (for at most 20 seconds): more ' +
        'than 4 counting at once ban the key for 2 minutes',
    );
    expect((await gw.app.inject({ url: '/docs/json' })).json()).toEqual(doc);
  });

  it('answers from its cache while the upstream is down', async () => {
    const upstream = await docUpstream();
    const gw = await gateway(upstream.url);
    const first = await gw.app.inject({ url: '/v1/openapi.json' });
    expect(first.statusCode).toBe(200);
    await upstream.close();
    const second = await gw.app.inject({ url: '/v1/openapi.json' });
    expect(second.statusCode).toBe(200);
    expect(second.body).toBe(first.body);
    expect(upstream.state.hits).toBe(1);
  });

  it('answers 503 upstream_unavailable in the Error shape when the upstream is unreachable', async () => {
    const gw = await gateway('http://127.0.0.1:9');
    const res = await gw.app.inject({ url: '/v1/openapi.json' });
    expect(expectError(res, 503)).toBe('upstream_unavailable');
    expectError(await gw.app.inject({ url: '/docs/json' }), 503);
    // The page itself does not depend on the upstream.
    expect((await gw.app.inject({ url: '/docs' })).statusCode).toBe(200);
  });

  it('answers 502 when the upstream sends something that is not an OpenAPI 3.1 document', async () => {
    const echo = await startEchoUpstream();
    cleanups.push(echo.close);
    const gw = await gateway(echo.url);
    expect(expectError(await gw.app.inject({ url: '/v1/openapi.json' }), 502)).toBe('upstream_unavailable');
  });

  it('answers 504 upstream_timeout when the upstream is too slow', async () => {
    const upstream = await docUpstream();
    upstream.state.mode = 'slow';
    const gw = await gateway(upstream.url, { UPSTREAM_TIMEOUT_MS: '200' });
    expect(expectError(await gw.app.inject({ url: '/v1/openapi.json' }), 504)).toBe('upstream_timeout');
  });
});

describe('/docs on the gateway', () => {
  it('serves the reference page and every asset it names without a key, from this origin only', async () => {
    const upstream = await docUpstream();
    const gw = await gateway(upstream.url);
    const page = await gw.app.inject({ url: '/docs', headers: { 'accept-encoding': 'gzip' } });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    const html = page.headers['content-encoding'] === 'gzip' ? gunzipSync(page.rawPayload).toString() : page.body;
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toMatch(/https?:|unsafe/);
    // No CDN, no other host: every script, style and icon is a path on this gateway.
    expect(html).not.toMatch(/https?:\/\/|\/\/[a-z]/i);
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] as string);
    expect(assets).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^\/docs\/static\/\d+\.\d+\.\d+\/swagger-ui\.css$/),
        expect.stringMatching(/^\/docs\/static\/\d+\.\d+\.\d+\/swagger-ui-bundle\.js$/),
        expect.stringMatching(/^\/docs\/static\/\d+\.\d+\.\d+\/swagger-ui-standalone-preset\.js$/),
        '/docs/static/swagger-initializer.js',
      ]),
    );
    // The same links, relative, when the page is asked with a trailing slash.
    const slash = await gw.app.inject({ url: '/docs/' });
    expect(slash.body).toMatch(/href="\.\/static\/\d+\.\d+\.\d+\/swagger-ui\.css"/);
    for (const asset of assets) {
      expect(asset).toMatch(/^\/docs\//);
      const res = await gw.app.inject({ url: asset });
      expect(res.statusCode, asset).toBe(200);
    }
    const initializer = await gw.app.inject({ url: '/docs/static/swagger-initializer.js' });
    expect(initializer.body).toContain("resolveUrl('./json')");
    expect(initializer.body).toContain('validatorUrl: null');

    // The page loads the same document /v1/openapi.json serves.
    const json = await gw.app.inject({ url: '/docs/json' });
    expect(json.statusCode).toBe(200);
    expect(json.json()).toEqual((await gw.app.inject({ url: '/v1/openapi.json' })).json());
    expect(upstream.state.hits).toBe(1);
  });
});

describe('the API reference and the per-address limit', () => {
  it('counts /docs/json against the address: 429 in the Error shape with Retry-After after ANON_PER_MINUTE, with or without a key', async () => {
    const upstream = await docUpstream();
    const gw = await gateway(upstream.url, { ANON_PER_MINUTE: '3' });
    const { key } = await addKey(gw.deps, 'pro');
    for (let i = 0; i < 3; i++) {
      const res = await gw.app.inject({ url: '/docs/json' });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBe('3');
      expect(res.headers['x-ratelimit-remaining']).toBe(String(2 - i));
    }
    const refused = await gw.app.inject({ url: '/docs/json' });
    expect(expectError(refused, 429)).toBe('rate_limit_exceeded');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(refused.headers['x-ratelimit-remaining']).toBe('0');
    // A key is not read here: the reference stays on the address's limit.
    const keyed = await gw.app.inject({ url: '/docs/json', headers: bearer(key) });
    expect(expectError(keyed, 429)).toBe('rate_limit_exceeded');
    for (const url of ['/v1', '/v1/openapi.json', '/docs', '/docs/static/swagger-initializer.js']) {
      expect((await gw.app.inject({ url })).statusCode, url).toBe(429);
    }
    // The pets service was asked once, for the first document.
    expect(upstream.state.hits).toBe(1);
  });

  it('puts the rate-limit headers on /v1, /v1/openapi.json and a 404 under /v1', async () => {
    const upstream = await docUpstream();
    const gw = await gateway(upstream.url);
    expectAddressLimitHeaders(await gw.app.inject({ url: '/v1' }), 59, '/v1');
    expectAddressLimitHeaders(await gw.app.inject({ url: '/v1/openapi.json' }), 58, '/v1/openapi.json');
    const missing = await gw.app.inject({ url: '/v1/nowhere' });
    expect(expectError(missing, 404)).toBe('not_found');
    expectAddressLimitHeaders(missing, 57, '/v1/nowhere');
  });
});

describe('/docs assets: compression and caching', () => {
  async function versionedBundle(gw: TestGateway): Promise<string> {
    const page = await gw.app.inject({ url: '/docs' });
    const bundle = /src="(\/docs\/static\/[^"]+\/swagger-ui-bundle\.js)"/.exec(page.body)?.[1];
    expect(bundle, page.body).toBeDefined();
    return bundle as string;
  }

  it.each([
    ['br', brotliDecompressSync],
    ['gzip', gunzipSync],
  ])('sends the swagger-ui bundle %s-encoded when asked, the same bytes once decoded', async (encoding, decode) => {
    const upstream = await docUpstream();
    const gw = await gateway(upstream.url);
    const url = await versionedBundle(gw);
    const plain = await gw.app.inject({ url });
    expect(plain.statusCode).toBe(200);
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.rawPayload.length).toBeGreaterThan(1_000_000);
    const res = await gw.app.inject({ url, headers: { 'accept-encoding': `${encoding}, identity;q=0.1` } });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-encoding']).toBe(encoding);
    expect(String(res.headers.vary)).toMatch(/accept-encoding/i);
    expect(res.rawPayload.length).toBeLessThan(plain.rawPayload.length / 2);
    expect(decode(res.rawPayload).equals(plain.rawPayload)).toBe(true);
    // The document is compressed too.
    const json = await gw.app.inject({ url: '/docs/json', headers: { 'accept-encoding': encoding } });
    expect(json.headers['content-encoding']).toBe(encoding);
    expect(JSON.parse(decode(json.rawPayload).toString())).toMatchObject({ openapi: '3.1.0' });
  });

  it('keeps versioned assets a year and answers a revalidation with 304', async () => {
    const upstream = await docUpstream();
    const gw = await gateway(upstream.url);
    const url = await versionedBundle(gw);
    const res = await gw.app.inject({ url, headers: { 'accept-encoding': 'gzip' } });
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(res.headers['last-modified']).toBeDefined();
    const etag = String(res.headers.etag);
    expect(etag).toMatch(/^(W\/)?"/);
    const again = await gw.app.inject({ url, headers: { 'accept-encoding': 'gzip', 'if-none-match': etag } });
    expect(again.statusCode).toBe(304);
    expect(again.rawPayload.length).toBe(0);
    expect(again.headers['x-ratelimit-limit']).toBe('60');
  });
});
