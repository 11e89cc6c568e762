import { describe, expect, it } from 'vitest';
import type { CustomerRecord } from '../../src/customers/customer-store.js';
import { FileCustomerError, FileCustomers } from '../../src/customers/file-customers.js';
import { MemoryCustomerStore } from '../../src/customers/memory-customer-store.js';
import { customerStoreContract } from './customer-store.contract.js';

// In front of a store with no file customers, the layer is the store: the same contract.
customerStoreContract('FileCustomers over MemoryCustomerStore', async () => ({
  store: new FileCustomers(new MemoryCustomerStore(), []),
  cleanup: async () => {},
}));

const filed = (id: string, createdAt: string, extra: Partial<CustomerRecord> = {}): CustomerRecord => ({
  id,
  name: id,
  plan: 'pro',
  billing: { anchorDay: 1, timeZone: 'UTC' },
  createdAt,
  ...extra,
});

describe('FileCustomers', () => {
  it("merges the file's customers into the store's pages in list order, each once, across any page size", async () => {
    const store = new MemoryCustomerStore();
    for (const day of [1, 3, 5]) await store.insert(filed(`cus_store${day}`, `2026-11-0${day}T00:00:00.000Z`));
    const layer = new FileCustomers(store, [
      filed('cus_file2', '2026-11-02T00:00:00.000Z'),
      filed('cus_file4', '2026-11-04T00:00:00.000Z', { plan: 'free', externalId: 'ext-4' }),
    ]);
    const expected = ['cus_store5', 'cus_file4', 'cus_store3', 'cus_file2', 'cus_store1'];
    for (const limit of [1, 2, 3, 5, 50]) {
      const seen: string[] = [];
      let after: string | undefined;
      do {
        const page = await layer.list({}, { limit, ...(after ? { after } : {}) });
        expect(page.items.length).toBeLessThanOrEqual(limit);
        seen.push(...page.items.map((c) => c.id));
        after = page.next ?? undefined;
      } while (after);
      expect(seen, `limit ${limit}`).toEqual(expected);
    }
    expect((await layer.list({ plan: 'free' }, { limit: 5 })).items.map((c) => c.id)).toEqual(['cus_file4']);
    expect((await layer.list({ externalId: 'ext-4' }, { limit: 5 })).items.map((c) => c.id)).toEqual(['cus_file4']);
  });

  it('finds file customers first, refuses to change or delete them, and hands out copies', async () => {
    const layer = new FileCustomers(new MemoryCustomerStore(), [filed('cus_file', '2026-11-01T00:00:00.000Z')]);
    const got = (await layer.get('cus_file')) as CustomerRecord;
    got.name = 'changed';
    expect((await layer.get('cus_file'))?.name).toBe('cus_file');
    await expect(layer.update('cus_file', { name: 'x' }, new Date())).rejects.toBeInstanceOf(FileCustomerError);
    await expect(layer.delete('cus_file', new Date())).rejects.toBeInstanceOf(FileCustomerError);
    await expect(layer.insert(filed('cus_file', '2026-11-02T00:00:00.000Z'))).rejects.toThrow(/already exists/);
    expect(layer.declares('cus_file')).toBe(true);
    expect(await layer.changedSince(new Date(0))).toEqual([]);
  });

  it("passes what is not the file's to the store, its kind and failures included", async () => {
    class DownStore extends MemoryCustomerStore {
      override async ping(): Promise<void> {
        throw new Error('store down');
      }
    }
    const store = new DownStore();
    const layer = new FileCustomers(store, [filed('cus_file', '2026-11-01T00:00:00.000Z', { externalId: 'ext-file' })]);
    expect(layer.kind).toBe('memory');
    await expect(layer.ping()).rejects.toThrow('store down');
    await expect(
      layer.insert(filed('cus_other', '2026-11-02T00:00:00.000Z', { externalId: 'ext-file' })),
    ).rejects.toMatchObject({
      field: 'externalId',
    });
    await layer.insert(filed('cus_stored', '2026-11-03T00:00:00.000Z', { externalId: 'ext-stored' }));
    expect(layer.declares('cus_stored')).toBe(false);
    expect((await layer.update('cus_stored', { name: 'Renamed' }, new Date('2026-11-04T00:00:00.000Z')))?.name).toBe(
      'Renamed',
    );
    expect(await layer.changedSince(new Date(0))).toEqual([
      { id: 'cus_stored', updatedAt: '2026-11-04T00:00:00.000Z' },
    ]);
    expect(await layer.delete('cus_stored', new Date('2026-11-05T00:00:00.000Z'))).toBe(true);
    expect(await layer.get('cus_stored')).toBeNull();
    // A listed file customer is a copy too.
    const [listed] = (await layer.list({}, { limit: 5 })).items;
    (listed as CustomerRecord).name = 'changed';
    expect((await layer.list({}, { limit: 5 })).items.map((c) => c.name)).toEqual(['cus_file']);
  });
});
