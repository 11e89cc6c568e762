import { createRegistry } from '@animal-store/common/metrics.js';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { expect } from 'vitest';
import { buildApp } from '../src/app.js';
import { MemoryPetStore } from '../src/store/memory-pet-store.js';
import type { PetStore } from '../src/store/pet-store.js';

export type App = ReturnType<typeof buildApp>;

interface InjectResult {
  statusCode: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
  json(): unknown;
}

export function newApp(store: PetStore = new MemoryPetStore(), registry = createRegistry('pets', false)): App {
  return buildApp({ logLevel: 'silent' }, { store, registry });
}

export async function createPet(app: App, body: Record<string, unknown>): Promise<{ id: number; status?: string }> {
  const res = await app.inject({ method: 'POST', url: '/v1/pets', payload: body });
  expect(res.statusCode).toBe(201);
  return res.json();
}

/** Every error: the status, the Error shape with a matching `status`, JSON, and nothing internal. */
export function expectError(res: InjectResult, status: number, code?: string): void {
  expect(res.statusCode, res.body).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
  const body = res.json() as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(['code', 'message', 'status']);
  expect(body.status).toBe(status);
  expect(typeof body.code).toBe('string');
  expect(typeof body.message).toBe('string');
  if (code) expect(body.code).toBe(code);
  expect(res.body).not.toMatch(/stack|\.(?:js|ts):\d+|node_modules/);
}

type OpenApiDoc = {
  servers: { url: string }[];
  paths: Record<
    string,
    Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }> }>
  >;
};

/**
 * Checks real responses against the app's own OpenAPI document: the status must be documented
 * for the operation and the body must match the documented schema. `path` is the route as
 * requested (/v1/pets); the document has it relative to its base address (/pets).
 */
export async function conformanceChecker(app: App) {
  const doc = (await app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as OpenApiDoc;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isInteger(n) });
  ajv.addSchema(doc, 'openapi.json');
  const cache = new Map<string, ValidateFunction>();
  const pointer = (s: string) => s.replaceAll('~', '~0').replaceAll('/', '~1');

  const base = doc.servers[0]?.url ?? '';
  return (res: InjectResult, route: string, method: 'get' | 'post'): void => {
    const path = route.startsWith(`${base}/`) ? route.slice(base.length) : route;
    const status = String(res.statusCode);
    const documented = doc.paths[path]?.[method]?.responses[status];
    expect(documented, `${method.toUpperCase()} ${path} does not document ${status}`).toBeDefined();
    expect(documented?.content?.['application/json'], `no JSON body documented for ${status}`).toBeDefined();
    const key = `${path} ${method} ${status}`;
    let validate = cache.get(key);
    if (!validate) {
      const ref = `openapi.json#/paths/${pointer(path)}/${method}/responses/${status}/content/application~1json/schema`;
      validate = ajv.compile({ $ref: ref });
      cache.set(key, validate);
    }
    const ok = validate(res.json());
    expect(ok, `${key}: ${ajv.errorsText(validate.errors)} in ${res.body}`).toBe(true);
  };
}

/** Parses a `Link: <url>; rel="next"` header into its URL, or undefined when there is none. */
export function nextLink(res: InjectResult): string | undefined {
  const header = res.headers.link;
  if (header === undefined) return undefined;
  const match = /^<([^>]+)>; rel="next"$/.exec(String(header));
  expect(match, `unexpected Link header ${String(header)}`).not.toBeNull();
  return match?.[1];
}
