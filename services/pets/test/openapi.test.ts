import SwaggerParser from '@apidevtools/swagger-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, newApp } from './helpers.js';

type Operation = {
  operationId: string;
  description?: string;
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
    expect(doc.servers).toEqual([{ url: '/v1' }]);
  });

  it('documents exactly the three operations, relative to the /v1 base, and hides probes, metrics and itself', () => {
    expect(Object.keys(doc.paths).sort()).toEqual(['/pets', '/pets/{petId}']);
    expect(Object.keys(doc.paths['/pets']!).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/pets/{petId}']!)).toEqual(['get']);
    expect(doc.paths['/pets']!.get!.operationId).toBe('listPets');
    expect(doc.paths['/pets']!.post!.operationId).toBe('createPet');
    expect(doc.paths['/pets/{petId}']!.get!.operationId).toBe('getPet');
  });

  it('marks getPet, and only getPet, deprecated', () => {
    expect(doc.paths['/pets/{petId}']!.get!.deprecated).toBe(true);
    expect(doc.paths['/pets']!.get!.deprecated).toBeUndefined();
    expect(doc.paths['/pets']!.post!.deprecated).toBeUndefined();
  });

  it('declares the bearer scheme for every operation', () => {
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
  });

  it('has the PetStatus, NewPet, Pet, Pets and Error components of the spec, referenced where used', () => {
    const { Error: ErrorSchema, PetStatus, NewPet, Pet, Pets } = doc.components.schemas;
    const statusRef = { $ref: '#/components/schemas/PetStatus' };
    expect(PetStatus).toMatchObject({ type: 'string', enum: ['available', 'pending', 'sold'] });
    expect(NewPet).toMatchObject({ type: 'object', required: ['name', 'categoryId'] });
    expect(Object.keys(NewPet!.properties as object).sort()).toEqual(['categoryId', 'name', 'status']);
    expect((NewPet!.properties as Record<string, unknown>).status).toEqual(statusRef);
    expect(ErrorSchema).toMatchObject({ type: 'object', required: ['code', 'message', 'status'] });
    expect(Pet).toMatchObject({ type: 'object', required: ['id', 'name', 'categoryId'] });
    expect(Object.keys(Pet!.properties as object).sort()).toEqual(['categoryId', 'id', 'name', 'status']);
    expect((Pet!.properties as Record<string, unknown>).status).toEqual(statusRef);
    expect(Pets).toMatchObject({ type: 'array', items: { $ref: '#/components/schemas/Pet' } });
    // The enum is written once: every other place refers to PetStatus.
    expect(JSON.stringify(doc).match(/"sold"/g)).toHaveLength(1);
  });

  it('forbids no additional property in responses, and says that unknown request fields are ignored', () => {
    const { Error: ErrorSchema, NewPet, Pet } = doc.components.schemas;
    expect(Pet).not.toHaveProperty('additionalProperties');
    expect(ErrorSchema).not.toHaveProperty('additionalProperties');
    expect(NewPet).not.toHaveProperty('additionalProperties');
    expect(NewPet!.description).toContain('Unknown fields are ignored');
  });

  it('gives realistic examples and the id range on the id parameters', () => {
    const { NewPet, Pet } = doc.components.schemas;
    expect(NewPet!.examples).toEqual([{ name: 'Rex', categoryId: 3, status: 'available' }]);
    expect(Pet!.examples).toEqual([{ id: 42, name: 'Rex', categoryId: 3, status: 'available' }]);
    const [petId] = doc.paths['/pets/{petId}']!.get!.parameters!;
    expect(petId?.schema).toMatchObject({ type: 'integer', format: 'int64', minimum: 1, maximum: 2 ** 53 - 1 });
    const after = doc.paths['/pets']!.get!.parameters!.find((p) => p.name === 'after');
    expect(after?.schema).toMatchObject({ type: 'integer', format: 'int64', minimum: 0, maximum: 2 ** 53 - 1 });
  });

  it('describes the list query: limit 1–100 default 20, the status enum, the after cursor', () => {
    const params = doc.paths['/pets']!.get!.parameters!;
    const byName = Object.fromEntries(params.map((p) => [p.name, p]));
    expect(byName.limit).toMatchObject({
      in: 'query',
      required: false,
      schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    });
    expect(byName.status?.schema).toEqual({ $ref: '#/components/schemas/PetStatus' });
    expect(byName.after?.schema).toMatchObject({ type: 'integer', format: 'int64' });
  });

  it('requires the NewPet body as JSON, and describes createPet', () => {
    expect(doc.paths['/pets']!.post!.description).toContain('`name` and `categoryId` are required');
    const body = doc.paths['/pets']!.post!.requestBody!;
    expect(body.required).toBe(true);
    expect(Object.keys(body.content)).toEqual(['application/json']);
    expect(body.content['application/json']!.schema).toEqual({ $ref: '#/components/schemas/NewPet' });
  });

  it('lists every status of the spec tables for each operation, plus what this service adds', () => {
    const codes = (path: string, method: string) => Object.keys(doc.paths[path]![method]!.responses).sort();
    expect(codes('/pets', 'get')).toEqual(['200', '400', '401', '429', '503']);
    expect(codes('/pets', 'post')).toEqual(['201', '400', '401', '413', '415', '429', '503']);
    expect(codes('/pets/{petId}', 'get')).toEqual(['200', '400', '401', '404', '429', '503']);
  });

  it('documents the Location, Link and deprecation headers', () => {
    expect(Object.keys(doc.paths['/pets']!.post!.responses['201']!.headers!)).toEqual(['Location']);
    expect(Object.keys(doc.paths['/pets']!.get!.responses['200']!.headers!)).toEqual(['Link']);
    for (const status of ['200', '404']) {
      expect(Object.keys(doc.paths['/pets/{petId}']!.get!.responses[status]!.headers!).sort()).toEqual([
        'Deprecation',
        'Link',
        'Sunset',
      ]);
    }
  });
});
