import { ErrorSchema } from '@animal-store/common/error-schema.js';
import { PLAIN_TEXT } from '@animal-store/common/plain-text.js';
import { type Static, Type } from 'typebox';

const PET_STATUSES = ['available', 'pending', 'sold'] as const;
export type PetStatus = (typeof PET_STATUSES)[number];

/** Largest integer a JSON number carries exactly; ids and categoryIds stay within it. */
const MAX_EXACT_INTEGER = Number.MAX_SAFE_INTEGER;

export const DEFAULT_PAGE_SIZE = 20;
const MAX_PAGE_SIZE = 100;
/** Most ids one `id` filter may name. */
const MAX_IDS = 100;
/** An animal id as text (unanchored): up to 15 digits keeps every id below 2^53, so it parses exactly. */
export const PET_ID_TEXT = '[1-9][0-9]{0,14}';
const ID_LIST_PATTERN = `^${PET_ID_TEXT}(,${PET_ID_TEXT}){0,${MAX_IDS - 1}}$`;

// A plain `enum` rather than a union of literals: one readable rule in the OpenAPI document and
// one clear validation message ("must be equal to one of the allowed values").
const PetStatusSchema = Type.Unsafe<PetStatus>({
  $id: 'PetStatus',
  type: 'string',
  enum: [...PET_STATUSES],
  description: 'Availability of the animal.',
  examples: ['available'],
});
// Routes and schemas point at the shared schemas by $ref so the OpenAPI document names them as
// components (the spec's PetStatus, NewPet, Pet, Pets, Error); Unsafe keeps the static type for
// the type provider.
const PetStatusRef = Type.Unsafe<PetStatus>(Type.Ref('PetStatus'));

const name = Type.String({
  minLength: 1,
  maxLength: 200,
  format: PLAIN_TEXT,
  description:
    "The animal's name: no control characters (U+0000–U+001F, U+007F–U+009F) and no bidirectional overrides or isolates (U+202A–U+202E, U+2066–U+2069).",
  examples: ['Rex'],
});
const categoryId = Type.Integer({
  format: 'int64',
  minimum: -MAX_EXACT_INTEGER,
  maximum: MAX_EXACT_INTEGER,
  description: 'Identifier of the category the animal belongs to (within ±(2^53−1), so JSON numbers stay exact).',
  examples: [3],
});

// No additionalProperties: false here: unknown fields are allowed and ignored (the handler
// copies only the declared ones), and the document should not claim they are refused.
const NewPetSchema = Type.Object(
  { name, categoryId, status: Type.Optional(PetStatusRef) },
  {
    $id: 'NewPet',
    description: 'An animal to add. Unknown fields are ignored. `status` has no default.',
    examples: [{ name: 'Rex', categoryId: 3, status: 'available' }],
  },
);
export type NewPet = Static<typeof NewPetSchema>;
export const NewPetRef = Type.Unsafe<NewPet>(Type.Ref('NewPet'));

// Open, like NewPet: a field added later must not break a client that validates strictly. The
// serializer still sends only the fields declared here.
const PetSchema = Type.Object(
  {
    id: Type.Integer({
      format: 'int64',
      minimum: 1,
      maximum: MAX_EXACT_INTEGER,
      description: 'Unique identifier assigned by the service on creation.',
      examples: [42],
    }),
    name,
    categoryId,
    status: Type.Optional(PetStatusRef),
  },
  {
    $id: 'Pet',
    description: 'An animal of the store. More fields may be added; clients ignore those they do not know.',
    examples: [{ id: 42, name: 'Rex', categoryId: 3, status: 'available' }],
  },
);
export type Pet = Static<typeof PetSchema>;

export const PetRef = Type.Unsafe<Pet>(Type.Ref('Pet'));
const PetsSchema = Type.Array(PetRef, { $id: 'Pets', description: 'A list of animals, ordered by id.' });
export const PetsRef = Type.Unsafe<Pet[]>(Type.Ref('Pets'));
export const ErrorRef = Type.Unsafe<Static<typeof ErrorSchema>>(Type.Ref('Error'));

/** Schemas registered with app.addSchema and the validators, in dependency order. */
export const sharedSchemas = [ErrorSchema, PetStatusSchema, NewPetSchema, PetSchema, PetsSchema];

export const ListPetsQuerySchema = Type.Object(
  {
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_PAGE_SIZE,
        default: DEFAULT_PAGE_SIZE,
        description: 'Maximum number of animals returned.',
      }),
    ),
    status: Type.Optional(PetStatusRef),
    after: Type.Optional(
      Type.Integer({
        format: 'int64',
        minimum: 0,
        description:
          'Cursor: return only animals whose id is greater than this (0: from the first). Taken from the `next` Link.',
        examples: [42],
      }),
    ),
    id: Type.Optional(
      Type.String({
        pattern: ID_LIST_PATTERN,
        description: `1 to ${MAX_IDS} comma-separated animal ids (positive integers), e.g. \`3,7,9\``,
        examples: ['3', '3,7,9'],
      }),
    ),
  },
  { additionalProperties: false },
);

/** For operations that take no query parameters: a stray one is a 400, as on the list. */
export const NoQuerySchema = Type.Object({}, { additionalProperties: false });

export const PetParamsSchema = Type.Object(
  {
    petId: Type.Integer({
      format: 'int64',
      description: 'Identifier of the animal. Any other 64-bit integer names no animal (404).',
      examples: [42],
    }),
  },
  { additionalProperties: false },
);

/**
 * What the document adds to parameters beyond their validation schemas:
 * - ids get the range ids are assigned in. Narrower than what the routes accept: any int64 is a
 *   fair question (an id that cannot exist is a 404, or an empty page for `after`, not a 400), so
 *   the validators do not enforce it.
 * - `status` keeps a description: a $ref loses its siblings on the way into the document.
 */
export const PARAMETER_DOCS: Record<string, { description?: string; schema?: Record<string, unknown> }> = {
  petId: { schema: { minimum: 1, maximum: MAX_EXACT_INTEGER } },
  after: { schema: { minimum: 0, maximum: MAX_EXACT_INTEGER } },
  status: { description: 'Return only animals with this status.' },
};
