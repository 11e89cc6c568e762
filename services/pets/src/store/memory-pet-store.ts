import type { NewPet, Pet } from '../schemas.js';
import { type ListOptions, type PetStore, toPet } from './pet-store.js';

/** The embedded store for development and tests: one process, lost on restart. */
export class MemoryPetStore implements PetStore {
  // Ids only grow, so insertion order is id order and listing needs no sort.
  private readonly pets = new Map<number, Pet>();
  private lastId = 0;

  async create(newPet: NewPet): Promise<Pet> {
    this.lastId += 1;
    const pet = toPet(this.lastId, newPet);
    this.pets.set(pet.id, pet);
    return { ...pet };
  }

  async get(id: number): Promise<Pet | null> {
    const pet = this.pets.get(id);
    return pet ? { ...pet } : null;
  }

  async list({ limit, status, after, ids }: ListOptions): Promise<Pet[]> {
    const page: Pet[] = [];
    // With ids, look up only those (in id order) instead of walking every pet.
    const candidates = ids
      ? [...new Set(ids)].sort((a, b) => a - b).flatMap((id) => this.pets.get(id) ?? [])
      : this.pets.values();
    for (const pet of candidates) {
      if (page.length >= limit) break;
      if (after !== undefined && pet.id <= after) continue;
      if (status !== undefined && pet.status !== status) continue;
      page.push({ ...pet });
    }
    return page;
  }

  async ping(): Promise<void> {}
}
