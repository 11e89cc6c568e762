import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { EnvReader } from '@animal-store/common/env.js';
import { createRegistry } from '@animal-store/common/metrics.js';
import { readOverloadConfig } from '@animal-store/common/overload.js';
import { addKey, startGateway, type TestGateway } from '@animal-store/gateway/test/support/helpers.js';
import { buildApp as buildPets } from '@animal-store/pets/app.js';
import { MemoryPetStore } from '@animal-store/pets/store/memory-pet-store.js';
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from './support/stack.js';
import { typeErrors } from './support/type-check.js';

/**
 * What an API consumer does with the published document: generate types with openapi-typescript,
 * write a client against them with openapi-fetch, type-check it, and run it against a real
 * gateway and pets service at the spec's base address form (`http://host:port/v1`).
 */

/**
 * The consumer's code. Type-checked (strict) against the generated types, then run. Each
 * `@ts-expect-error` is a call the document must make a type error: if the types accepted it,
 * the directive itself would fail the check.
 */
const CONSUMER = `
import createClient from 'openapi-fetch';
import type { components, paths } from './schema';

type Pet = components['schemas']['Pet'];
type NewPet = components['schemas']['NewPet'];
type PetStatus = components['schemas']['PetStatus'];
type ApiError = components['schemas']['Error'];
type Usage = components['schemas']['Usage'];

export async function scenario(baseUrl: string, key: string) {
  const client = createClient<paths>({ baseUrl, headers: { Authorization: \`Bearer \${key}\` } });

  const status: PetStatus = 'available';
  const newPet: NewPet = { name: 'Rex', categoryId: 3, status };
  const created = await client.POST('/pets', { body: newPet });
  const pet: Pet | undefined = created.data;
  if (!pet) throw new Error(\`createPet answered \${created.response.status} \${JSON.stringify(created.error)}\`);
  const id: number = pet.id;

  const listed = await client.GET('/pets', { params: { query: { limit: 5, status: 'available' } } });
  const pets: Pet[] | undefined = listed.data;
  const remaining = listed.response.headers.get('X-RateLimit-Remaining');

  const read = await client.GET('/pets/{petId}', { params: { path: { petId: id } } });
  const again: Pet | undefined = read.data;

  // A bad body: the 400 comes back as the typed Error.
  const invalid = await client.POST('/pets', { body: { name: '', categoryId: 3 } });
  const badRequest: ApiError | undefined = invalid.error;

  // No key: the 401 comes back as the typed Error too.
  const anonymous = createClient<paths>({ baseUrl });
  const refused = await anonymous.GET('/pets');
  const unauthorized: ApiError | undefined = refused.error;

  // The key's own usage: its windows and this billing period's units, at no cost.
  const usage = await client.GET('/usage');
  const mine: Usage | undefined = usage.data;
  const minute = mine?.key.windows.minute;

  return {
    usage: { status: usage.response.status, plan: mine?.key.plan, customer: mine?.customer, minute, units: mine?.key.billingPeriod.units },
    created: { status: created.response.status, location: created.response.headers.get('Location'), pet },
    listed: { status: listed.response.status, pets, remaining },
    read: { status: read.response.status, pet: again, sunset: read.response.headers.get('Sunset') },
    badRequest: { status: invalid.response.status, body: badRequest },
    unauthorized: { status: refused.response.status, body: unauthorized },
  };
}

export function mistakes(client: ReturnType<typeof createClient<paths>>) {
  return [
    // @ts-expect-error paths are relative to the base address, which already ends in /v1
    client.GET('/v1/pets'),
    // @ts-expect-error categoryId is required
    client.POST('/pets', { body: { name: 'Rex' } }),
    // @ts-expect-error status is one of the PetStatus values
    client.GET('/pets', { params: { query: { status: 'lost' } } }),
    // @ts-expect-error petId is a number
    client.GET('/pets/{petId}', { params: { path: { petId: '1' } } }),
  ];
}
`;

let pets: ReturnType<typeof buildPets>;
let gateway: TestGateway;
let dir: string;

// Both services run in this process, where the TypeScript compiler holds the event loop for
// seconds: load shedding by event-loop delay would refuse the client's requests.
const NO_EVENT_LOOP_SHEDDING = { OVERLOAD_EVENT_LOOP_DELAY_MS: '0' };

beforeAll(async () => {
  pets = buildPets(
    { logLevel: 'silent', overload: readOverloadConfig(new EnvReader(NO_EVENT_LOOP_SHEDDING)) },
    { store: new MemoryPetStore(), registry: createRegistry('pets', false) },
  );
  await pets.listen({ host: '127.0.0.1', port: 0 });
  gateway = await startGateway({
    upstream: `http://127.0.0.1:${(pets.server.address() as AddressInfo).port}`,
    env: NO_EVENT_LOOP_SHEDDING,
  });
  await gateway.listen();
  // Inside the repository, so that the consumer's `openapi-fetch` resolves from its node_modules.
  const cache = join(REPO_ROOT, 'node_modules', '.cache');
  await mkdir(cache, { recursive: true });
  dir = await mkdtemp(join(cache, 'openapi-client-'));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
  await gateway?.close();
  await pets?.close();
});

/** Type-checks the consumer against the generated types as a strict project would; returns the errors. */

describe('a client generated from the published document', () => {
  it('type-checks, and lists, creates and reads a pet, reads its usage and a typed 400 and 401 at http://host:port/v1', {
    timeout: 60_000,
  }, async () => {
    const documentUrl = `${gateway.url}/v1/openapi.json`;
    const doc = (await (await fetch(documentUrl)).json()) as OpenAPI3;
    // The base address the document names, resolved as a client resolves it: the spec's form.
    const baseUrl = new URL(doc.servers?.[0]?.url ?? '', documentUrl).href;
    expect(baseUrl).toBe(`${gateway.url}/v1`);

    await writeFile(join(dir, 'schema.d.ts'), astToString(await openapiTS(doc)));
    await writeFile(join(dir, 'consumer.ts'), CONSUMER);
    expect(typeErrors([join(dir, 'consumer.ts')])).toEqual([]);

    const js = ts.transpileModule(CONSUMER, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText;
    await writeFile(join(dir, 'consumer.mjs'), js);
    const consumer = (await import(pathToFileURL(join(dir, 'consumer.mjs')).href)) as {
      scenario(baseUrl: string, key: string): Promise<Record<string, Record<string, unknown>>>;
    };
    const { key } = await addKey(gateway.deps, 'pro');
    const result = await consumer.scenario(baseUrl, key);

    const pet = { id: expect.any(Number), name: 'Rex', categoryId: 3, status: 'available' };
    expect(result.created).toEqual({ status: 201, location: expect.any(String), pet });
    const id = (result.created as { pet: { id: number } }).pet.id;
    expect(result.created?.location).toBe(`/v1/pets?id=${id}`);
    expect(result.listed).toEqual({ status: 200, pets: [{ ...pet, id }], remaining: expect.any(String) });
    expect(result.read).toEqual({ status: 200, pet: { ...pet, id }, sunset: 'Thu, 05 Dec 2030 00:00:00 GMT' });
    expect(result.badRequest).toEqual({
      status: 400,
      body: { code: 'invalid_request', message: expect.any(String), status: 400 },
    });
    // Four requests went through the gate before the read (the 400 was admitted, then refused by the pets
    // service); the read itself took nothing.
    expect(result.usage).toEqual({
      status: 200,
      plan: 'pro',
      customer: undefined,
      minute: { limit: 300, used: 4, remaining: 296, resetAt: expect.any(String) },
      units: expect.any(Number),
    });
    expect(result.unauthorized).toEqual({
      status: 401,
      body: { code: 'missing_api_key', message: expect.any(String), status: 401 },
    });
  });
});
