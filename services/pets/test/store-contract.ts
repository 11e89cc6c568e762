import { beforeEach, describe, expect, it } from 'vitest';
import type { NewPet, PetStatus } from '../src/schemas.js';
import type { PetStore } from '../src/store/pet-store.js';

/**
 * What every PetStore must do, run against each backend. `makeStore` returns an empty store
 * each time it is called.
 */
export function petStoreContract(name: string, makeStore: () => Promise<PetStore>): void {
  describe(`PetStore contract: ${name}`, () => {
    let store: PetStore;

    beforeEach(async () => {
      store = await makeStore();
    });

    async function seed(statuses: (PetStatus | undefined)[]): Promise<number[]> {
      const ids: number[] = [];
      for (const [i, status] of statuses.entries()) {
        ids.push((await store.create({ name: `pet ${i}`, categoryId: i, status })).id);
      }
      return ids;
    }

    it('returns the created pet with a positive id, and get returns the same pet', async () => {
      const created = await store.create({ name: 'Rex', categoryId: 7, status: 'available' });
      expect(created).toEqual({ id: created.id, name: 'Rex', categoryId: 7, status: 'available' });
      expect(Number.isSafeInteger(created.id) && created.id > 0).toBe(true);
      expect(await store.get(created.id)).toEqual(created);
    });

    it('assigns strictly increasing ids', async () => {
      const ids = await seed([undefined, 'sold', undefined, 'pending', 'available']);
      for (let i = 1; i < ids.length; i++) expect(ids[i]).toBeGreaterThan(ids[i - 1]!);
    });

    it('keeps an absent status absent, in create, get and list', async () => {
      const created = await store.create({ name: 'No status', categoryId: 1 });
      expect('status' in created).toBe(false);
      const got = await store.get(created.id);
      expect(got).toEqual({ id: created.id, name: 'No status', categoryId: 1 });
      expect(got && 'status' in got).toBe(false);
      const [listed] = await store.list({ limit: 10 });
      expect(listed && 'status' in listed).toBe(false);
    });

    it('round-trips every status and the extreme exact categoryIds', async () => {
      const statuses: PetStatus[] = ['available', 'pending', 'sold'];
      for (const status of statuses) {
        const pet = await store.create({ name: status, categoryId: -Number.MAX_SAFE_INTEGER, status });
        expect((await store.get(pet.id))?.status).toBe(status);
      }
      const big = await store.create({ name: 'big', categoryId: Number.MAX_SAFE_INTEGER });
      expect((await store.get(big.id))?.categoryId).toBe(Number.MAX_SAFE_INTEGER);
    });

    it('stores only the declared fields', async () => {
      const sneaky = { name: 'Rex', categoryId: 1, id: 999, _id: 'x', extra: { $gt: '' } } as unknown as NewPet;
      const created = await store.create(sneaky);
      expect(created.id).not.toBe(999);
      expect(await store.get(created.id)).toEqual({ id: created.id, name: 'Rex', categoryId: 1 });
      expect(await store.list({ limit: 10 })).toEqual([{ id: created.id, name: 'Rex', categoryId: 1 }]);
    });

    it('returns null for a missing id', async () => {
      const [id] = await seed(['sold']);
      expect(await store.get(id! + 1)).toBeNull();
      expect(await store.get(0)).toBeNull();
      expect(await store.get(-1)).toBeNull();
    });

    it('lists an empty store as empty', async () => {
      expect(await store.list({ limit: 20 })).toEqual([]);
    });

    it('lists in id order, at most limit', async () => {
      const ids = await seed(Array.from({ length: 7 }, () => undefined));
      expect((await store.list({ limit: 100 })).map((p) => p.id)).toEqual(ids);
      expect((await store.list({ limit: 3 })).map((p) => p.id)).toEqual(ids.slice(0, 3));
      expect((await store.list({ limit: 1 })).map((p) => p.id)).toEqual(ids.slice(0, 1));
    });

    it('filters by status, still in id order', async () => {
      const statuses: (PetStatus | undefined)[] = ['sold', 'available', undefined, 'sold', 'pending', 'sold'];
      const ids = await seed(statuses);
      const sold = await store.list({ limit: 100, status: 'sold' });
      expect(sold.map((p) => p.id)).toEqual(ids.filter((_, i) => statuses[i] === 'sold'));
      expect(sold.every((p) => p.status === 'sold')).toBe(true);
      expect((await store.list({ limit: 2, status: 'sold' })).map((p) => p.id)).toEqual(
        ids.filter((_, i) => statuses[i] === 'sold').slice(0, 2),
      );
      expect(await store.list({ limit: 100, status: 'pending' })).toHaveLength(1);
    });

    it('pages with the after cursor, alone and with a status', async () => {
      const statuses: PetStatus[] = ['sold', 'available', 'sold', 'sold', 'available', 'sold'];
      const ids = await seed(statuses);
      expect((await store.list({ limit: 2, after: ids[1] })).map((p) => p.id)).toEqual(ids.slice(2, 4));
      expect((await store.list({ limit: 100, after: ids.at(-1) })).map((p) => p.id)).toEqual([]);
      expect((await store.list({ limit: 100, after: 0 })).map((p) => p.id)).toEqual(ids);
      const soldAfterFirst = await store.list({ limit: 2, status: 'sold', after: ids[0] });
      expect(soldAfterFirst.map((p) => p.id)).toEqual([ids[2], ids[3]]);
    });

    it('lists only the given ids, in id order, once each, with status, after and limit still applied', async () => {
      const ids = await seed(['sold', 'available', 'sold', 'pending', 'sold', 'available']);
      const pick = [ids[4]!, ids[0]!, ids[2]!, ids[1]!, ids[4]!];
      expect((await store.list({ limit: 100, ids: pick })).map((p) => p.id)).toEqual([ids[0], ids[1], ids[2], ids[4]]);
      expect((await store.list({ limit: 100, ids: [ids[3]!] })).map((p) => p.id)).toEqual([ids[3]]);
      expect(await store.list({ limit: 100, ids: [ids.at(-1)! + 100] })).toEqual([]);
      expect(await store.list({ limit: 100, ids: [] })).toEqual([]);
      expect((await store.list({ limit: 100, ids: pick, status: 'sold' })).map((p) => p.id)).toEqual([
        ids[0],
        ids[2],
        ids[4],
      ]);
      expect((await store.list({ limit: 100, ids: pick, after: ids[1] })).map((p) => p.id)).toEqual([ids[2], ids[4]]);
      expect((await store.list({ limit: 2, ids: pick })).map((p) => p.id)).toEqual([ids[0], ids[1]]);
    });

    it('gives 200 concurrent creates 200 distinct ids, all listed', async () => {
      const created = await Promise.all(
        Array.from({ length: 200 }, (_, i) => store.create({ name: `pet ${i}`, categoryId: i })),
      );
      const ids = created.map((p) => p.id);
      expect(new Set(ids).size).toBe(200);
      const listed = await store.list({ limit: 300 });
      expect(listed.map((p) => p.id)).toEqual([...ids].sort((a, b) => a - b));
      const next = await store.create({ name: 'after the burst', categoryId: 0 });
      expect(next.id).toBeGreaterThan(Math.max(...ids));
    });

    it('answers ping', async () => {
      await expect(store.ping()).resolves.toBeUndefined();
    });
  });
}
