import { afterEach, describe, expect, it, type TestContext } from 'vitest';
import {
  type CustomerRecord,
  type CustomerStore,
  DuplicateCustomerError,
  newCustomerId,
} from '../../src/customers/customer-store.js';
import { DEFAULT_BILLING } from '../../src/limits/billing-period.js';
import { BadCursorError } from '../../src/paging/page.js';

export interface CustomerStoreFixture {
  store: CustomerStore;
  cleanup(): Promise<void>;
}

let clock = Date.parse('2026-11-01T00:00:00.000Z');

/** A customer created one second after the previous one (unless told when). */
function customer(overrides: Partial<CustomerRecord> = {}): CustomerRecord {
  clock += 1000;
  return {
    id: newCustomerId(),
    name: 'Acme',
    plan: 'pro',
    billing: { ...DEFAULT_BILLING },
    createdAt: new Date(clock).toISOString(),
    ...overrides,
  };
}

async function all(store: CustomerStore, limit: number, filter = {}): Promise<CustomerRecord[]> {
  const seen: CustomerRecord[] = [];
  let after: string | undefined;
  do {
    const page = await store.list(filter, { limit, ...(after ? { after } : {}) });
    expect(page.items.length).toBeLessThanOrEqual(limit);
    seen.push(...page.items);
    after = page.next ?? undefined;
  } while (after);
  return seen;
}

/** What every CustomerStore must do, run against each implementation. */
export function customerStoreContract(name: string, make: () => Promise<CustomerStoreFixture>): void {
  describe(`${name} (CustomerStore contract)`, () => {
    let fixture: CustomerStoreFixture | null = null;
    afterEach(async () => {
      await fixture?.cleanup();
      fixture = null;
    });
    async function fresh(_ctx?: TestContext): Promise<CustomerStore> {
      fixture = await make();
      return fixture.store;
    }

    it('gives back every field it was given', async () => {
      const store = await fresh();
      const record = customer({
        limits: { perMinute: 300, perMonth: 1_000_000 },
        billing: { anchorDay: 15, timeZone: 'Europe/Paris' },
        externalId: 'cus_StripeAbc123',
        metadata: { crm: 'hubspot-42', tier: 'gold' },
      });
      await store.insert(record);
      expect(await store.get(record.id)).toEqual(record);
      expect(await store.get(newCustomerId())).toBeNull();
    });

    it('refuses a second customer with the same id, or the same externalId while the first is live', async () => {
      const store = await fresh();
      const first = customer({ externalId: 'crm-1' });
      await store.insert(first);
      await expect(store.insert(customer({ id: first.id }))).rejects.toMatchObject({
        field: 'id',
        message: 'a customer with this id already exists',
      });
      const clash = store.insert(customer({ externalId: 'crm-1' }));
      await expect(clash).rejects.toBeInstanceOf(DuplicateCustomerError);
      await expect(store.insert(customer({ externalId: 'crm-1' }))).rejects.toMatchObject({
        field: 'externalId',
        message: 'another customer already has this externalId',
      });
      // Once deleted, the business may give the id to a new customer.
      expect(await store.delete(first.id, new Date())).toBe(true);
      await store.insert(customer({ externalId: 'crm-1' }));
      expect((await store.list({ externalId: 'crm-1' }, { limit: 10 })).items).toHaveLength(1);
    });

    it('lets one of two concurrent creates or changes to the same externalId win, never both', async () => {
      const store = await fresh();
      const settled = await Promise.allSettled(
        Array.from({ length: 5 }, () => store.insert(customer({ externalId: 'raced' }))),
      );
      expect(settled.filter((s) => s.status === 'fulfilled')).toHaveLength(1);
      expect(settled.filter((s) => s.status === 'rejected').map((s) => s.reason)).toEqual(
        Array.from({ length: 4 }, () => expect.objectContaining({ field: 'externalId' })),
      );
      const others = Array.from({ length: 4 }, () => customer());
      for (const record of others) await store.insert(record);
      const moved = await Promise.allSettled(
        others.map((record) => store.update(record.id, { externalId: 'moved' }, new Date())),
      );
      expect(moved.filter((s) => s.status === 'fulfilled')).toHaveLength(1);
      expect((await store.list({ externalId: 'moved' }, { limit: 10 })).items).toHaveLength(1);
      expect((await store.list({ externalId: 'raced' }, { limit: 10 })).items).toHaveLength(1);
    });

    it('lists newest first, a page at a time, every customer once', async () => {
      const store = await fresh();
      const records = Array.from({ length: 23 }, () => customer());
      for (const record of records) await store.insert(record);
      const listed = await all(store, 5);
      expect(listed.map((r) => r.id)).toEqual(records.reverse().map((r) => r.id));
      const last = await store.list({}, { limit: 23 });
      expect(last.next).toBeNull();
    });

    it('orders customers created in the same millisecond by id, across a page boundary', async () => {
      const store = await fresh();
      const createdAt = customer().createdAt;
      const records = Array.from({ length: 7 }, () => customer({ createdAt }));
      for (const record of records) await store.insert(record);
      const ids = (await all(store, 2)).map((r) => r.id);
      expect(ids).toEqual(
        records
          .map((r) => r.id)
          .sort()
          .reverse(),
      );
    });

    it('does not shift later pages when customers are created between two pages', async () => {
      const store = await fresh();
      const records = Array.from({ length: 6 }, () => customer());
      for (const record of records) await store.insert(record);
      const first = await store.list({}, { limit: 3 });
      await store.insert(customer({ name: 'Newcomer' }));
      const second = await store.list({}, { limit: 3, after: first.next! });
      expect([...first.items, ...second.items].map((r) => r.id)).toEqual(records.reverse().map((r) => r.id));
    });

    it('filters by name prefix (any case, no pattern syntax), plan and externalId', async () => {
      const store = await fresh();
      const acme = customer({ name: 'Acme Corp', plan: 'pro', externalId: 'ext-acme' });
      const acmeLabs = customer({ name: 'acme labs', plan: 'free' });
      const dotted = customer({ name: 'A.C.M.E', plan: 'free' });
      const other = customer({ name: 'Zebra', plan: 'pro' });
      for (const record of [acme, acmeLabs, dotted, other]) await store.insert(record);
      const ids = async (filter: object) => (await all(store, 2, filter)).map((r) => r.id);
      expect(await ids({ name: 'ACME' })).toEqual([acmeLabs.id, acme.id]);
      expect(await ids({ name: 'a.c' })).toEqual([dotted.id]);
      expect(await ids({ name: 'a.*' })).toEqual([]);
      expect(await ids({ plan: 'free' })).toEqual([dotted.id, acmeLabs.id]);
      expect(await ids({ plan: 'free', name: 'acme' })).toEqual([acmeLabs.id]);
      expect(await ids({ externalId: 'ext-acme' })).toEqual([acme.id]);
      expect(await ids({ externalId: 'ext-none' })).toEqual([]);
    });

    it('refuses a cursor it did not make', async () => {
      const store = await fresh();
      await store.insert(customer());
      for (const after of ['not-a-cursor!', Buffer.from('["x","y"]').toString('base64url'), 'e30']) {
        await expect(store.list({}, { limit: 5, after })).rejects.toBeInstanceOf(BadCursorError);
      }
    });

    it('applies changes, removes fields set to null, and stamps updatedAt', async () => {
      const store = await fresh();
      const record = customer({ limits: { perMinute: 100 }, externalId: 'x-1', metadata: { a: '1' } });
      await store.insert(record);
      const at = new Date('2026-11-20T10:00:00.000Z');
      const updated = await store.update(
        record.id,
        { name: 'Renamed', plan: 'enterprise', limits: null, externalId: null, metadata: { b: '2' } },
        at,
      );
      const expected = {
        ...record,
        name: 'Renamed',
        plan: 'enterprise',
        metadata: { b: '2' },
        updatedAt: at.toISOString(),
      };
      delete expected.limits;
      delete expected.externalId;
      expect(updated).toEqual(expected);
      expect(await store.get(record.id)).toEqual(expected);
      expect((await all(store, 5, { name: 'renamed' })).map((r) => r.id)).toEqual([record.id]);
      expect(await all(store, 5, { name: 'acme' })).toEqual([]);
      // New limits, billing settings and externalId replace the old; what is not named stays.
      const later = new Date('2026-11-21T10:00:00.000Z');
      const billing = { anchorDay: 15, timeZone: 'Europe/Paris' };
      const again = { ...expected, limits: { perDay: 10 }, billing, externalId: 'x-2', updatedAt: later.toISOString() };
      expect(await store.update(record.id, { limits: { perDay: 10 }, billing, externalId: 'x-2' }, later)).toEqual(
        again,
      );
      expect(await store.get(record.id)).toEqual(again);
    });

    it('keeps credits set to null (none), and removes them on "plan" (its plan’s apply)', async () => {
      const store = await fresh();
      const record = customer({ credits: { refill: { amount: 100, every: 'day' } } });
      await store.insert(record);
      const at = new Date('2026-11-20T10:00:00.000Z');
      const off = await store.update(record.id, { credits: null }, at);
      expect(off?.credits).toBeNull();
      expect((await store.get(record.id))?.credits).toBeNull();
      const back = await store.update(record.id, { credits: 'plan' }, at);
      expect(back).not.toHaveProperty('credits');
      expect(await store.get(record.id)).not.toHaveProperty('credits');
      expect(await store.update(record.id, { credits: {} }, at)).toMatchObject({ credits: {} });
      expect(await store.update(record.id, { credits: 'plan', name: 'Kept' }, at)).toMatchObject({ name: 'Kept' });
      expect(await store.get(record.id)).not.toHaveProperty('credits');
    });

    it('keeps a customer unchanged when its new externalId is taken', async () => {
      const store = await fresh();
      const a = customer({ externalId: 'taken' });
      const b = customer({ externalId: 'mine' });
      await store.insert(a);
      await store.insert(b);
      await expect(store.update(b.id, { externalId: 'taken', name: 'B2' }, new Date())).rejects.toMatchObject({
        field: 'externalId',
      });
      expect(await store.get(b.id)).toEqual(b);
      // Its own externalId again is no conflict.
      expect(await store.update(b.id, { externalId: 'mine' }, new Date())).not.toBeNull();
    });

    it('changes customers without an externalId beside others without one: having none is no clash', async () => {
      const store = await fresh();
      const [a, b] = [customer(), customer()];
      await store.insert(a);
      await store.insert(b);
      expect(await store.update(b.id, { name: 'B2' }, new Date())).toMatchObject({ id: b.id, name: 'B2' });
      expect(await store.update(a.id, { externalId: null }, new Date())).not.toHaveProperty('externalId');
    });

    it('deletes once; a deleted customer is gone from get, list and update, but reported as changed', async () => {
      const store = await fresh();
      const record = customer();
      await store.insert(record);
      const before = new Date('2026-11-25T00:00:00.000Z');
      const at = new Date('2026-11-26T00:00:00.000Z');
      expect(await store.delete(record.id, at)).toBe(true);
      expect(await store.delete(record.id, at)).toBe(false);
      expect(await store.get(record.id)).toBeNull();
      expect((await store.list({}, { limit: 10 })).items).toEqual([]);
      expect(await store.update(record.id, { name: 'ghost' }, at)).toBeNull();
      expect(await store.changedSince(before)).toEqual([{ id: record.id, updatedAt: at.toISOString() }]);
      expect(await store.changedSince(at)).toEqual([]);
    });
  });
}
