import type { NewPet, Pet, PetStatus } from '../schemas.js';

export interface ListOptions {
  /** At least 1. */
  limit: number;
  status?: PetStatus | undefined;
  /** Only pets with a greater id: the pagination cursor. */
  after?: number | undefined;
  /** Only pets with one of these ids (any order, duplicates allowed). */
  ids?: readonly number[] | undefined;
}

/** Where pets live. Every implementation passes test/store-contract.ts. */
export interface PetStore {
  /** Assigns the next id; ids only grow. */
  create(newPet: NewPet): Promise<Pet>;
  get(id: number): Promise<Pet | null>;
  /** Ordered by id ascending, at most `limit` pets. */
  list(options: ListOptions): Promise<Pet[]>;
  /** Resolves when the store can serve requests; the readiness probe. */
  ping(): Promise<void>;
}

/**
 * Builds a stored pet from the declared fields only, so nothing else a client sent (an unknown
 * field, an operator-shaped object) can reach a database document. An absent status stays absent.
 */
export function toPet(id: number, newPet: NewPet): Pet {
  const pet: Pet = { id, name: newPet.name, categoryId: newPet.categoryId };
  if (newPet.status !== undefined) pet.status = newPet.status;
  return pet;
}
