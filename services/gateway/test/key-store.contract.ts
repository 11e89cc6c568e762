import { afterEach, describe, expect, it, type TestContext } from 'vitest';
import { generateApiKey, hashApiKey, keyPrefix, newKeyId } from '../src/keys/api-key.js';
import { DuplicateKeyError, type KeyRecord, type KeyStore } from '../src/keys/key-store.js';
import type { Limits, Plan } from '../src/plans.js';

export interface KeyStoreFixture {
  store: KeyStore;
  cleanup(): Promise<void>;
}

function record(plan: Plan = 'free', overrides: Partial<KeyRecord> = {}, limits?: Limits): KeyRecord {
  const key = generateApiKey();
  return {
    id: newKeyId(),
    name: `contract ${plan}`,
    plan,
    ...(limits ? { limits } : {}),
    sha256: hashApiKey(key),
    prefix: keyPrefix(key),
    createdAt: '2024-05-01T12:34:56.789Z',
    ...overrides,
  };
}

const byId = (a: { id: string }, b: { id: string }) => a.id.localeCompare(b.id);

/**
 * What every KeyStore must do, run against each implementation. `make` gives a fresh, empty
 * store and a way to dispose of it; it returns null when the backend is not available here.
 */
export function keyStoreContract(name: string, make: () => Promise<KeyStoreFixture> | null): void {
  describe(`${name} (KeyStore contract)`, () => {
    let fixture: KeyStoreFixture | null = null;

    afterEach(async () => {
      await fixture?.cleanup();
      fixture = null;
    });

    async function fresh(ctx: TestContext): Promise<KeyStore> {
      const made = make();
      if (made === null) ctx.skip(`${name} is not available`);
      fixture = await (made as Promise<KeyStoreFixture>);
      return fixture.store;
    }

    it('gives back an inserted enterprise record, limits included, by hash and by id', async (ctx) => {
      const store = await fresh(ctx);
      const rec = record('enterprise', {}, { perMinute: 7, perDay: 70 });
      await store.insert(rec);
      expect(await store.findByHash(rec.sha256)).toStrictEqual(rec);
      expect(await store.get(rec.id)).toStrictEqual(rec);
    });

    it('gives back a plan record without inventing limits or revokedAt, with createdAt as ISO text', async (ctx) => {
      const store = await fresh(ctx);
      const rec = record('pro', { createdAt: new Date('2025-01-02T03:04:05.006Z').toISOString() });
      await store.insert(rec);
      const got = await store.get(rec.id);
      expect(got).toStrictEqual(rec);
      expect(got).not.toHaveProperty('limits');
      expect(got).not.toHaveProperty('revokedAt');
      expect(typeof got?.createdAt).toBe('string');
      expect(new Date(got?.createdAt as string).toISOString()).toBe(got?.createdAt);
      expect(got?.createdAt).toBe('2025-01-02T03:04:05.006Z');
    });

    it('keeps a record without a prefix (as loaded from a keys file) without one', async (ctx) => {
      const store = await fresh(ctx);
      const { prefix: _, ...rec } = record('business');
      await store.insert(rec);
      const got = await store.findByHash(rec.sha256);
      expect(got).toStrictEqual(rec);
      expect(got).not.toHaveProperty('prefix');
    });

    it('refuses a second record with the same id, and keeps the first', async (ctx) => {
      const store = await fresh(ctx);
      const first = record('free');
      await store.insert(first);
      const second = record('pro', { id: first.id });
      await expect(store.insert(second)).rejects.toBeInstanceOf(DuplicateKeyError);
      expect(await store.get(first.id)).toStrictEqual(first);
      expect(await store.findByHash(second.sha256)).toBeNull();
      expect(await store.list()).toHaveLength(1);
    });

    it('refuses a second record with the same hash, and keeps the first', async (ctx) => {
      const store = await fresh(ctx);
      const first = record('free');
      await store.insert(first);
      const second = record('pro', { sha256: first.sha256 });
      await expect(store.insert(second)).rejects.toBeInstanceOf(DuplicateKeyError);
      expect(await store.findByHash(first.sha256)).toStrictEqual(first);
      expect(await store.get(second.id)).toBeNull();
      expect(await store.list()).toHaveLength(1);
    });

    it('answers null for an unknown hash or id', async (ctx) => {
      const store = await fresh(ctx);
      await store.insert(record('free'));
      expect(await store.findByHash(hashApiKey(generateApiKey()))).toBeNull();
      expect(await store.get(newKeyId())).toBeNull();
    });

    it('lists nothing when empty, and every record once inserted', async (ctx) => {
      const store = await fresh(ctx);
      expect(await store.list()).toEqual([]);
      const records = [
        record('free'),
        record('pro'),
        record('business'),
        record('enterprise', {}, { perMinute: 1, perDay: 2 }),
      ];
      for (const r of records) await store.insert(r);
      const listed = await store.list();
      expect(listed).toHaveLength(records.length);
      expect([...listed].sort(byId)).toStrictEqual([...records].sort(byId));
    });

    it('revokes once: sets revokedAt, answers true, then false; keeps the record', async (ctx) => {
      const store = await fresh(ctx);
      const rec = record('pro');
      const other = record('free');
      await store.insert(rec);
      await store.insert(other);
      const at = new Date('2025-06-01T10:00:00.123Z');
      expect(await store.revoke(rec.id, at)).toBe(true);
      expect(await store.revoke(rec.id, new Date('2025-06-02T10:00:00.000Z'))).toBe(false);
      const expected = { ...rec, revokedAt: '2025-06-01T10:00:00.123Z' };
      expect(await store.get(rec.id)).toStrictEqual(expected);
      expect(await store.findByHash(rec.sha256)).toStrictEqual(expected);
      expect((await store.list()).find((r) => r.id === rec.id)).toStrictEqual(expected);
      // The other key is untouched.
      expect(await store.get(other.id)).toStrictEqual(other);
    });

    it('answers false when revoking an unknown id', async (ctx) => {
      const store = await fresh(ctx);
      expect(await store.revoke(newKeyId(), new Date())).toBe(false);
    });

    it('reports only the keys revoked strictly after the given moment', async (ctx) => {
      const store = await fresh(ctx);
      const early = record('free');
      const late = record('pro');
      const live = record('business');
      for (const r of [early, late, live]) await store.insert(r);
      const t1 = new Date('2025-06-01T10:00:00.000Z');
      const t2 = new Date('2025-06-01T10:05:00.000Z');
      await store.revoke(early.id, t1);
      await store.revoke(late.id, t2);

      const sinceStart = await store.revokedSince(new Date('2025-06-01T09:00:00.000Z'));
      expect([...sinceStart].sort(byId)).toStrictEqual(
        [
          { id: early.id, sha256: early.sha256, revokedAt: t1.toISOString() },
          { id: late.id, sha256: late.sha256, revokedAt: t2.toISOString() },
        ].sort(byId),
      );
      expect(await store.revokedSince(new Date('2025-06-01T10:01:00.000Z'))).toStrictEqual([
        { id: late.id, sha256: late.sha256, revokedAt: t2.toISOString() },
      ]);
      expect(await store.revokedSince(t1)).toStrictEqual([
        { id: late.id, sha256: late.sha256, revokedAt: t2.toISOString() },
      ]);
      expect(await store.revokedSince(t2)).toEqual([]);
      expect(await store.revokedSince(new Date('2030-01-01T00:00:00.000Z'))).toEqual([]);
    });

    it('answers ping', async (ctx) => {
      const store = await fresh(ctx);
      await expect(store.ping()).resolves.toBeUndefined();
    });

    it('hands out copies: changing a returned or inserted record does not change the store', async (ctx) => {
      const store = await fresh(ctx);
      const rec = record('enterprise', {}, { perMinute: 5, perDay: 50 });
      const original = structuredClone(rec);
      await store.insert(rec);
      rec.name = 'changed after insert';
      (rec.limits as Limits).perMinute = 999;

      const got = (await store.get(original.id)) as KeyRecord;
      got.name = 'changed';
      got.plan = 'free';
      (got.limits as Limits).perDay = 1;
      got.revokedAt = '2020-01-01T00:00:00.000Z';

      const found = (await store.findByHash(original.sha256)) as KeyRecord;
      found.sha256 = 'f'.repeat(64);
      (found.limits as Limits).perMinute = 2;

      const [listed] = await store.list();
      (listed as KeyRecord).name = 'changed in list';
      ((listed as KeyRecord).limits as Limits).perDay = 3;

      expect(await store.get(original.id)).toStrictEqual(original);
      expect(await store.findByHash(original.sha256)).toStrictEqual(original);
      expect(await store.list()).toStrictEqual([original]);
      expect(await store.revokedSince(new Date(0))).toEqual([]);
    });
  });
}
