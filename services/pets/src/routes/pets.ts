import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { getPetDeprecationHeaders } from '../deprecation.js';
import {
  DEFAULT_PAGE_SIZE,
  ListPetsQuerySchema,
  NewPetRef,
  NoQuerySchema,
  PetParamsSchema,
  PetRef,
  type PetStatus,
  PetsRef,
} from '../schemas.js';
import type { PetStore } from '../store/pet-store.js';
import { error, gatewayResponses, json, unavailable } from './responses.js';

export interface PetRoutesOptions {
  store: PetStore;
}

function nextPageLink(limit: number, status: PetStatus | undefined, id: string | undefined, after: number): string {
  const query = new URLSearchParams({ limit: String(limit) });
  if (status !== undefined) query.set('status', status);
  if (id !== undefined) query.set('id', id);
  query.set('after', String(after));
  // Commas need no escaping in a query; `id=3,7,9` stays readable.
  return `</v1/pets?${query.toString().replaceAll('%2C', ',')}>; rel="next"`;
}

const deprecationHeaderDocs = {
  Deprecation: { type: 'string', description: 'RFC 9745: when the deprecation was announced.' },
  Sunset: { type: 'string', description: 'RFC 8594: when the operation is removed.' },
  Link: {
    type: 'string',
    description:
      'The successor operation (`</v1/pets?id={petId}>; rel="successor-version"`) and the deprecation notice.',
  },
} as const;

/** GET /v1/pets: a page of animals, filtered by id and status. */
const listPets: FastifyPluginAsyncTypebox<PetRoutesOptions> = async (app, { store }) => {
  app.get(
    '/v1/pets',
    {
      schema: {
        operationId: 'listPets',
        summary: 'List animals',
        description:
          'Animals ordered by id ascending, at most `limit`, optionally only those with the given ids ' +
          '(`id=3` or `id=3,7,9`; ids that do not exist are left out) and with one status. When more exist, a ' +
          '`Link: <...>; rel="next"` header points at the next page (cursor `after`).',
        tags: ['pets'],
        querystring: ListPetsQuerySchema,
        response: {
          200: json('The list, at most `limit` animals.', PetsRef, {
            Link: { type: 'string', description: 'rel="next": the next page, present only when more animals exist.' },
          }),
          400: error('A query parameter is invalid (an id list that is not 1 to 100 ids), unknown or repeated.'),
          ...gatewayResponses,
          503: unavailable,
        },
      },
    },
    async (request, reply) => {
      const { status, after, id } = request.query;
      const limit = request.query.limit ?? DEFAULT_PAGE_SIZE;
      // The schema's pattern admits only comma-separated integers below 2^53.
      const ids = id?.split(',').map(Number);
      // One more than asked tells whether a next page exists without a count.
      const pets = await store.list({ limit: limit + 1, status, after, ids });
      const page = pets.slice(0, limit);
      const last = page.at(-1);
      if (pets.length > limit && last) reply.header('link', nextPageLink(limit, status, id, last.id));
      return page;
    },
  );
};

/** POST /v1/pets: adds an animal. */
const createPet: FastifyPluginAsyncTypebox<PetRoutesOptions> = async (app, { store }) => {
  app.post(
    '/v1/pets',
    {
      schema: {
        operationId: 'createPet',
        summary: 'Add an animal',
        description:
          'Adds an animal and answers it with the identifier the service assigned, and where to read it in ' +
          '`Location` (`/v1/pets?id={id}`). ' +
          '`name` and `categoryId` are required; `status` is optional and has no default; fields not listed ' +
          'in NewPet are ignored.',
        tags: ['pets'],
        body: NewPetRef,
        response: {
          201: json('The animal is added; the body carries the assigned id.', PetRef, {
            Location: { type: 'string', description: 'Where to read the new animal: /v1/pets?id={id}.' },
          }),
          400: error(
            'The body is not JSON, nests arrays and objects deeper than 64 levels, lacks name or categoryId, or holds an invalid value.',
          ),
          ...gatewayResponses,
          413: error('The body is larger than 1 MiB.'),
          415: error('The body is not application/json, or comes in a Content-Encoding other than identity.'),
          503: unavailable,
        },
      },
    },
    async (request, reply) => {
      const { name, categoryId, status } = request.body;
      const pet = await store.create({ name, categoryId, status });
      // The supported read, not the deprecated /v1/pets/{id}.
      reply.code(201).header('location', `/v1/pets?id=${pet.id}`);
      return pet;
    },
  );
};

/** GET /v1/pets/:petId: one animal, the deprecated way. */
const getPet: FastifyPluginAsyncTypebox<PetRoutesOptions> = async (app, { store }) => {
  app.get(
    '/v1/pets/:petId',
    {
      onRequest: async (request, reply) => {
        // Still the raw text here: onRequest runs before validation.
        reply.headers(getPetDeprecationHeaders(String(request.params.petId)));
      },
      schema: {
        operationId: 'getPet',
        summary: 'Get an animal (deprecated, removed 5 December 2030: use GET /pets with its status or id filter)',
        description:
          'Deprecated: removed on 5 December 2030. Use `GET /pets` instead: `GET /pets?id={petId}` answers ' +
          'this animal (in a list), and the `status` filter lists animals by availability. Every response ' +
          'carries Deprecation, Sunset and Link headers; the Link names the replacement.',
        tags: ['pets'],
        deprecated: true,
        params: PetParamsSchema,
        querystring: NoQuerySchema,
        response: {
          200: json('The animal exists.', PetRef, deprecationHeaderDocs),
          400: error('petId is not a 64-bit integer, or a query parameter was given.', deprecationHeaderDocs),
          ...gatewayResponses,
          404: error('No animal with that identifier exists.', deprecationHeaderDocs),
          503: unavailable,
        },
      },
    },
    async (request) => {
      // Any int64 is a fair question; ids beyond 2^53 (parsed inexactly) or below 1 simply do not exist.
      const pet = await store.get(request.params.petId);
      if (!pet) throw new ApiError(404, 'not_found', 'No pet with that id');
      return pet;
    },
  );
};

export const petRoutes: FastifyPluginAsyncTypebox<PetRoutesOptions> = async (app, opts) => {
  await app.register(listPets, opts);
  await app.register(createPet, opts);
  await app.register(getPet, opts);
};
