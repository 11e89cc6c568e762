import SwaggerParser from '@apidevtools/swagger-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, newApp } from './helpers.js';

type Operation = {
  operationId: string;
  deprecated?: boolean;
  parameters?: { name: string; in: string; required?: boolean; schema: Record<string, unknown> }[];
  requestBody?: { required?: boolean; content: Record<string, { schema: Record<string, unknown> }> };
  responses: Record<string, { headers?: Record<string, unknown>; content?: Record<string, unknown> }>;
};
type Doc = {
  openapi: string;
  info: { version: string };
  servers: { url: string }[];
  security: Record<string, string[]>[];
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Record<string, unknown>>; securitySchemes: Record<string, unknown> };
};

let app: App;
let doc: Doc;

beforeAll(async () => {
  app = newApp();
  const res = await app.inject({ url: '/v1/openapi.json' });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  doc = res.json();
});

afterAll(async () => {
  await app.close();
});

describe('GET /v1/openapi.json', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeDefined();
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('1.0.0');
    expect(doc.servers).toEqual([{ url: '/' }]);
  });

  it('documents exactly the three operations, under /v1, and hides probes, metrics and itself', () => {
    expect(Object.keys(doc.paths).sort()).toEqual(['/v1/pets', '/v1/pets/{petId}']);
    expect(Object.keys(doc.paths['/v1/pets']!).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/v1/pets/{petId}']!)).toEqual(['get']);
    expect(doc.paths['/v1/pets']!.get!.operationId).toBe('listPets');
    expect(doc.paths['/v1/pets']!.post!.operationId).toBe('createPet');
    expect(doc.paths['/v1/pets/{petId}']!.get!.operationId).toBe('getPet');
  });

  it('marks getPet, and only getPet, deprecated', () => {
    expect(doc.paths['/v1/pets/{petId}']!.get!.deprecated).toBe(true);
    expect(doc.paths['/v1/pets']!.get!.deprecated).toBeUndefined();
    expect(doc.paths['/v1/pets']!.post!.deprecated).toBeUndefined();
  });

  it('declares the bearer scheme for every operation', () => {
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
  });

  it('has Error, Pet and Pets components with the spec fields', () => {
    const { Error: ErrorSchema, Pet, Pets } = doc.components.schemas;
    expect(ErrorSchema).toMatchObject({ type: 'object', required: ['code', 'message', 'status'] });
    expect(Pet).toMatchObject({ type: 'object', required: ['id', 'name', 'categoryId'] });
    expect(Object.keys(Pet!.properties as object).sort()).toEqual(['categoryId', 'id', 'name', 'status']);
    expect(Pets).toMatchObject({ type: 'array', items: { $ref: '#/components/schemas/Pet' } });
  });

  it('describes the list query: limit 1–100 default 20, the status enum, the after cursor', () => {
    const params = doc.paths['/v1/pets']!.get!.parameters!;
    const byName = Object.fromEntries(params.map((p) => [p.name, p]));
    expect(byName.limit).toMatchObject({
      in: 'query',
      required: false,
      schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    });
    expect(byName.status?.schema).toMatchObject({ type: 'string', enum: ['available', 'pending', 'sold'] });
    expect(byName.after?.schema).toMatchObject({ type: 'integer', format: 'int64' });
  });

  it('requires the NewPet body as JSON, name and categoryId required', () => {
    const body = doc.paths['/v1/pets']!.post!.requestBody!;
    expect(body.required).toBe(true);
    expect(Object.keys(body.content)).toEqual(['application/json']);
    expect(body.content['application/json']!.schema).toMatchObject({ required: ['name', 'categoryId'] });
  });

  it('lists every status of the spec tables for each operation, plus what this service adds', () => {
    const codes = (path: string, method: string) => Object.keys(doc.paths[path]![method]!.responses).sort();
    expect(codes('/v1/pets', 'get')).toEqual(['200', '400', '401', '429', '503']);
    expect(codes('/v1/pets', 'post')).toEqual(['201', '400', '401', '413', '415', '429', '503']);
    expect(codes('/v1/pets/{petId}', 'get')).toEqual(['200', '400', '401', '404', '429', '503']);
  });

  it('documents the Location, Link and deprecation headers', () => {
    expect(Object.keys(doc.paths['/v1/pets']!.post!.responses['201']!.headers!)).toEqual(['Location']);
    expect(Object.keys(doc.paths['/v1/pets']!.get!.responses['200']!.headers!)).toEqual(['Link']);
    for (const status of ['200', '404']) {
      expect(Object.keys(doc.paths['/v1/pets/{petId}']!.get!.responses[status]!.headers!).sort()).toEqual([
        'Deprecation',
        'Link',
        'Sunset',
      ]);
    }
  });
});
