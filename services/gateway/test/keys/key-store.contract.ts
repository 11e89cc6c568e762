import { afterEach, describe, expect, it, type TestContext } from 'vitest';
import { generateApiKey, hashApiKey, keyPrefix, newKeyId } from '../../src/keys/api-key.js';
import { DuplicateKeyError, type KeyRecord, type KeyStore } from '../../src/keys/key-store.js';
import { BadCursorError } from '../../src/paging/page.js';
import type { Limits, Plan } from '../../src/plans/plans.js';

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

/** Every record after a cursor, page after page. */
async function everyKeyAfter(store: KeyStore, start: string): Promise<KeyRecord[]> {
  const all: KeyRecord[] = [];
  let after: string | undefined = start;
  while (after) {
    const page = await store.page({}, { limit: 2, after });
    all.push(...page.items);
    after = page.next ?? undefined;
  }
  return all;
}

/** Every record, page after page (small pages, so the walk crosses page boundaries). */
async function everyKey(store: KeyStore): Promise<KeyRecord[]> {
  const all: KeyRecord[] = [];
  let after: string | undefined;
  do {
    const page = await store.page({}, { limit: 2, ...(after ? { after } : {}) });
    all.push(...page.items);
    after = page.next ?? undefined;
  } while (after);
  return all;
}

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
      expect(await everyKey(store)).toHaveLength(1);
    });

    it('refuses a second record with the same hash, and keeps the first', async (ctx) => {
      const store = await fresh(ctx);
      const first = record('free');
      await store.insert(first);
      const second = record('pro', { sha256: first.sha256 });
      await expect(store.insert(second)).rejects.toBeInstanceOf(DuplicateKeyError);
      expect(await store.findByHash(first.sha256)).toStrictEqual(first);
      expect(await store.get(second.id)).toBeNull();
      expect(await everyKey(store)).toHaveLength(1);
    });

    it("refuses a record whose previous secret is another key's previous secret, and keeps the first", async (ctx) => {
      const store = await fresh(ctx);
      const previous = { sha256: hashApiKey(generateApiKey()), expiresAt: '2030-01-01T00:00:00.000Z' };
      const first = record('free', { previous });
      await store.insert(first);
      const second = record('pro', { previous });
      await expect(store.insert(second)).rejects.toBeInstanceOf(DuplicateKeyError);
      expect(await store.findByHash(previous.sha256)).toStrictEqual(first);
      expect(await store.get(second.id)).toBeNull();
    });

    it('answers null for an unknown hash or id', async (ctx) => {
      const store = await fresh(ctx);
      await store.insert(record('free'));
      expect(await store.findByHash(hashApiKey(generateApiKey()))).toBeNull();
      expect(await store.get(newKeyId())).toBeNull();
    });

    it('pages nothing when empty, and every record once inserted', async (ctx) => {
      const store = await fresh(ctx);
      expect(await everyKey(store)).toEqual([]);
      const records = [
        record('free'),
        record('pro'),
        record('business'),
        record('enterprise', {}, { perMinute: 1, perDay: 2 }),
      ];
      for (const r of records) await store.insert(r);
      const listed = await everyKey(store);
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
      const expected = { ...rec, updatedAt: '2025-06-01T10:00:00.123Z', revokedAt: '2025-06-01T10:00:00.123Z' };
      expect(await store.get(rec.id)).toStrictEqual(expected);
      expect(await store.findByHash(rec.sha256)).toStrictEqual(expected);
      expect((await everyKey(store)).find((r) => r.id === rec.id)).toStrictEqual(expected);
      // The other key is untouched.
      expect(await store.get(other.id)).toStrictEqual(other);
    });

    it('answers false when revoking an unknown id', async (ctx) => {
      const store = await fresh(ctx);
      expect(await store.revoke(newKeyId(), new Date())).toBe(false);
    });

    it('reports only the keys changed (updated, rotated, revoked) strictly after the given moment', async (ctx) => {
      const store = await fresh(ctx);
      const revoked = record('free');
      const updated = record('pro');
      const rotated = record('business');
      const untouched = record('free');
      for (const r of [revoked, updated, rotated, untouched]) await store.insert(r);
      const t1 = new Date('2025-06-01T10:00:00.000Z');
      const t2 = new Date('2025-06-01T10:05:00.000Z');
      const t3 = new Date('2025-06-01T10:10:00.000Z');
      await store.revoke(revoked.id, t1);
      await store.update(updated.id, { name: 'renamed' }, t2);
      const next = hashApiKey(generateApiKey());
      await store.rotate(rotated.id, { sha256: next, previousExpiresAt: '2025-06-02T10:10:00.000Z' }, t3);

      const all = await store.changedSince(new Date('2025-06-01T09:00:00.000Z'));
      expect([...all].sort(byId)).toStrictEqual(
        [
          { id: revoked.id, sha256: revoked.sha256, updatedAt: t1.toISOString() },
          { id: updated.id, sha256: updated.sha256, updatedAt: t2.toISOString() },
          { id: rotated.id, sha256: next, updatedAt: t3.toISOString() },
        ].sort(byId),
      );
      expect(await store.changedSince(t1)).toHaveLength(2);
      expect(await store.changedSince(t2)).toStrictEqual([
        { id: rotated.id, sha256: next, updatedAt: t3.toISOString() },
      ]);
      expect(await store.changedSince(t3)).toEqual([]);
    });

    it('updates plan, name, limits and expiry of a live key, and clears what is given as null', async (ctx) => {
      const store = await fresh(ctx);
      const rec = record('free');
      await store.insert(rec);
      const at = new Date('2025-07-01T00:00:00.000Z');
      const expected: KeyRecord = {
        ...rec,
        plan: 'enterprise',
        name: 'acme',
        limits: { perMinute: 9, perDay: 90 },
        expiresAt: '2031-01-01T00:00:00.000Z',
        updatedAt: at.toISOString(),
      };
      const changes = {
        plan: 'enterprise' as const,
        name: 'acme',
        limits: { perMinute: 9, perDay: 90 },
        expiresAt: '2031-01-01T00:00:00.000Z',
      };
      expect(await store.update(rec.id, changes, at)).toStrictEqual(expected);
      expect(await store.get(rec.id)).toStrictEqual(expected);
      expect(await store.findByHash(rec.sha256)).toStrictEqual(expected);

      const later = new Date('2025-07-02T00:00:00.000Z');
      const cleared = await store.update(rec.id, { plan: 'pro', limits: null, expiresAt: null }, later);
      const { limits: _l, expiresAt: _e, ...rest } = expected;
      expect(cleared).toStrictEqual({ ...rest, plan: 'pro', updatedAt: later.toISOString() });
      expect(await store.get(rec.id)).toStrictEqual(cleared);
      expect(cleared).not.toHaveProperty('limits');
      expect(cleared).not.toHaveProperty('expiresAt');
    });

    it('keeps credits set to null (none), and removes them on "plan", with or without an expiry change', async (ctx) => {
      const store = await fresh(ctx);
      const rec = record('free');
      await store.insert(rec);
      const at = new Date('2025-07-01T00:00:00.000Z');
      expect((await store.update(rec.id, { credits: { refill: { amount: 5, every: 'day' } } }, at))?.credits).toEqual({
        refill: { amount: 5, every: 'day' },
      });
      expect((await store.update(rec.id, { credits: null }, at))?.credits).toBeNull();
      expect((await store.get(rec.id))?.credits).toBeNull();
      expect(await store.update(rec.id, { credits: 'plan' }, at)).not.toHaveProperty('credits');
      expect(await store.get(rec.id)).not.toHaveProperty('credits');
      // An expiry change takes another path in MongoDB (a pipeline update).
      await store.update(rec.id, { credits: {} }, at);
      const moved = await store.update(rec.id, { credits: 'plan', expiresAt: '2031-01-01T00:00:00.000Z' }, at);
      expect(moved).toMatchObject({ expiresAt: '2031-01-01T00:00:00.000Z' });
      expect(moved).not.toHaveProperty('credits');
      expect(await store.findByHash(rec.sha256)).not.toHaveProperty('credits');
    });

    it('changes nothing and answers null when updating or rotating an unknown or revoked key', async (ctx) => {
      const store = await fresh(ctx);
      const rec = record('free');
      await store.insert(rec);
      await store.revoke(rec.id, new Date('2025-06-01T00:00:00.000Z'));
      const before = await store.get(rec.id);
      const rotation = { sha256: hashApiKey(generateApiKey()), previousExpiresAt: '2025-06-03T00:00:00.000Z' };
      expect(await store.update(rec.id, { plan: 'pro' }, new Date())).toBeNull();
      expect(await store.rotate(rec.id, rotation, new Date())).toBeNull();
      expect(await store.update(newKeyId(), { plan: 'pro' }, new Date())).toBeNull();
      expect(await store.rotate(newKeyId(), rotation, new Date())).toBeNull();
      expect(await store.get(rec.id)).toStrictEqual(before);
      expect(await store.findByHash(rotation.sha256)).toBeNull();
    });

    it('rotates only from the secret it is told is current: another answers null and changes nothing', async (ctx) => {
      const store = await fresh(ctx);
      const rec = record('pro');
      await store.insert(rec);
      const planned = (from: string) => ({
        sha256: hashApiKey(generateApiKey()),
        previousExpiresAt: '2025-08-02T00:00:00.000Z',
        from,
      });
      const first = planned(rec.sha256);
      const second = planned(rec.sha256);
      expect((await store.rotate(rec.id, first, new Date('2025-08-01T00:00:00.000Z')))?.sha256).toBe(first.sha256);
      const before = await store.get(rec.id);
      expect(await store.rotate(rec.id, second, new Date('2025-08-01T00:01:00.000Z'))).toBeNull();
      expect(await store.get(rec.id)).toStrictEqual(before);
      expect(await store.findByHash(rec.sha256)).toStrictEqual(before);
      expect(await store.findByHash(second.sha256)).toBeNull();
    });

    it('rotates: the new and the previous secret find one record; a second rotation ends the oldest secret', async (ctx) => {
      const store = await fresh(ctx);
      const rec = record('pro');
      await store.insert(rec);
      const second = hashApiKey(generateApiKey());
      const t1 = new Date('2025-08-01T00:00:00.000Z');
      const once = await store.rotate(
        rec.id,
        { sha256: second, prefix: 'ask_abcdef', previousExpiresAt: '2025-08-02T00:00:00.000Z' },
        t1,
      );
      const expected: KeyRecord = {
        ...rec,
        sha256: second,
        prefix: 'ask_abcdef',
        previous: { sha256: rec.sha256, expiresAt: '2025-08-02T00:00:00.000Z' },
        updatedAt: t1.toISOString(),
      };
      expect(once).toStrictEqual(expected);
      expect(await store.findByHash(second)).toStrictEqual(expected);
      expect(await store.findByHash(rec.sha256)).toStrictEqual(expected);
      expect(await store.get(rec.id)).toStrictEqual(expected);

      const third = hashApiKey(generateApiKey());
      const t2 = new Date('2025-08-01T01:00:00.000Z');
      const twice = await store.rotate(rec.id, { sha256: third, previousExpiresAt: '2025-08-01T02:00:00.000Z' }, t2);
      const { prefix: _p, ...withoutPrefix } = expected;
      const expected2: KeyRecord = {
        ...withoutPrefix,
        sha256: third,
        previous: { sha256: second, expiresAt: '2025-08-01T02:00:00.000Z' },
        updatedAt: t2.toISOString(),
      };
      expect(twice).toStrictEqual(expected2);
      expect(await store.findByHash(third)).toStrictEqual(expected2);
      expect(await store.findByHash(second)).toStrictEqual(expected2);
      expect(await store.findByHash(rec.sha256)).toBeNull();
      expect(await everyKey(store)).toStrictEqual([expected2]);
    });

    it('folds the old expiry into the previous secret when the expiry changes: its end never moves later', async (ctx) => {
      const store = await fresh(ctx);
      const rec = record('pro');
      await store.insert(rec);
      const second = hashApiKey(generateApiKey());
      await store.rotate(rec.id, { sha256: second, previousExpiresAt: '2025-09-01T01:00:00.000Z' }, new Date());
      const soon = '2025-09-01T00:00:10.000Z';
      const shortened = await store.update(rec.id, { expiresAt: soon }, new Date('2025-09-01T00:00:00.000Z'));
      // Cut by the key's expiry until then, but its own end is kept while the key could still change.
      expect(shortened?.previous).toStrictEqual({ sha256: rec.sha256, expiresAt: '2025-09-01T01:00:00.000Z' });

      const at = new Date('2025-09-01T00:00:20.000Z');
      const changes = {
        expiresAt: null,
        name: '$sha256',
        plan: 'enterprise' as const,
        limits: { perMinute: 5, perDay: 50 },
      };
      // The rotation gave no prefix: the record keeps none.
      const { prefix: _p, ...withoutPrefix } = rec;
      const expected: KeyRecord = {
        ...withoutPrefix,
        sha256: second,
        name: '$sha256',
        plan: 'enterprise',
        limits: { perMinute: 5, perDay: 50 },
        previous: { sha256: rec.sha256, expiresAt: soon },
        updatedAt: at.toISOString(),
      };
      expect(await store.update(rec.id, changes, at)).toStrictEqual(expected);
      expect(await store.findByHash(rec.sha256)).toStrictEqual(expected);

      // A later expiry moves nothing back; a key without a previous secret gains none.
      const later = await store.update(
        rec.id,
        { expiresAt: '2031-01-01T00:00:00.000Z', limits: null, plan: 'pro' },
        at,
      );
      expect(later?.previous).toStrictEqual({ sha256: rec.sha256, expiresAt: soon });
      expect(later).not.toHaveProperty('limits');
      const plain = record('free');
      await store.insert(plain);
      const expiring = await store.update(plain.id, { expiresAt: '2031-01-01T00:00:00.000Z' }, at);
      expect(expiring).toStrictEqual({ ...plain, expiresAt: '2031-01-01T00:00:00.000Z', updatedAt: at.toISOString() });
    });

    it("keeps the expiry and the previous secret's end when a change leaves the expiry alone", async (ctx) => {
      const store = await fresh(ctx);
      // An expiry earlier than the previous secret's own end (as a keys file may have it).
      const rec = record('pro', {
        expiresAt: '2030-06-01T00:00:00.000Z',
        previous: { sha256: hashApiKey(generateApiKey()), expiresAt: '2031-01-01T00:00:00.000Z' },
      });
      await store.insert(rec);
      const at = new Date('2025-10-01T00:00:00.000Z');
      const expected = { ...rec, name: 'renamed', plan: 'business' as const, updatedAt: at.toISOString() };
      expect(await store.update(rec.id, { name: 'renamed', plan: 'business' }, at)).toStrictEqual(expected);
      expect(await store.get(rec.id)).toStrictEqual(expected);
    });

    it("leaves the previous secret's end where it was when the expiry moves later", async (ctx) => {
      const store = await fresh(ctx);
      const previous = { sha256: hashApiKey(generateApiKey()), expiresAt: '2029-12-01T00:00:00.000Z' };
      const rec = record('pro', { expiresAt: '2030-01-01T00:00:00.000Z', previous });
      await store.insert(rec);
      const at = new Date('2025-10-01T00:00:00.000Z');
      const later = await store.update(rec.id, { expiresAt: '2032-01-01T00:00:00.000Z' }, at);
      expect(later).toStrictEqual({ ...rec, expiresAt: '2032-01-01T00:00:00.000Z', updatedAt: at.toISOString() });
    });

    it('refuses a rotation to a hash another key holds, changing nothing', async (ctx) => {
      const store = await fresh(ctx);
      const a = record('free');
      const b = record('pro');
      await store.insert(a);
      await store.insert(b);
      await expect(
        store.rotate(a.id, { sha256: b.sha256, previousExpiresAt: '2025-08-02T00:00:00.000Z' }, new Date()),
      ).rejects.toBeInstanceOf(DuplicateKeyError);
      expect(await store.get(a.id)).toStrictEqual(a);
      expect(await store.findByHash(b.sha256)).toStrictEqual(b);
    });

    it('keeps an inserted expiry and previous secret (as loaded from a keys file)', async (ctx) => {
      const store = await fresh(ctx);
      const old = hashApiKey(generateApiKey());
      const rec = record('free', {
        expiresAt: '2031-02-03T04:05:06.007Z',
        previous: { sha256: old, expiresAt: '2030-01-01T00:00:00.000Z' },
      });
      await store.insert(rec);
      expect(await store.get(rec.id)).toStrictEqual(rec);
      expect(await store.findByHash(old)).toStrictEqual(rec);
    });

    it('applies concurrent changes to one key each in full: none is lost to another', async (ctx) => {
      const store = await fresh(ctx);
      const rec = record('free');
      await store.insert(rec);
      const at = new Date('2025-07-01T00:00:00.000Z');
      await Promise.all([
        store.update(rec.id, { name: 'renamed' }, at),
        store.update(rec.id, { plan: 'business' }, at),
        store.update(rec.id, { scopes: ['pets:read'] }, at),
        store.update(rec.id, { allowedCidrs: ['10.0.0.0/8'] }, at),
        store.update(rec.id, { customerId: 'cus_A' }, at),
      ]);
      expect(await store.get(rec.id)).toMatchObject({
        name: 'renamed',
        plan: 'business',
        scopes: ['pets:read'],
        allowedCidrs: ['10.0.0.0/8'],
        customerId: 'cus_A',
      });
      expect((await store.liveKeysOf('cus_A')).map((r) => r.id)).toEqual([rec.id]);
    });

    it('pages a filter that few records pass across many records, each once', async (ctx) => {
      const store = await fresh(ctx);
      const at = (i: number) => new Date(Date.parse('2026-01-01T00:00:00.000Z') + i * 1000).toISOString();
      const made = Array.from({ length: 450 }, (_, i) =>
        record(i % 50 === 0 ? 'business' : 'free', { createdAt: at(i) }),
      );
      for (const rec of made) await store.insert(rec);
      const seen: string[] = [];
      let after: string | undefined;
      do {
        const page = await store.page({ plan: 'business' }, { limit: 4, ...(after ? { after } : {}) });
        seen.push(...page.items.map((r) => r.id));
        after = page.next ?? undefined;
      } while (after);
      const expected = made.filter((r) => r.plan === 'business').map((r) => r.id);
      expect(seen).toEqual(expected.reverse());
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

      const [listed] = await everyKey(store);
      (listed as KeyRecord).name = 'changed in list';
      ((listed as KeyRecord).limits as Limits).perDay = 3;

      expect(await store.get(original.id)).toStrictEqual(original);
      expect(await store.findByHash(original.sha256)).toStrictEqual(original);
      expect(await everyKey(store)).toStrictEqual([original]);
      expect(await store.changedSince(new Date(0))).toEqual([]);
    });

    it("lists a customer's live keys, oldest first, and follows a key moved away or detached", async (ctx) => {
      const store = await fresh(ctx);
      const first = record('pro', { customerId: 'cus_A', createdAt: '2026-11-01T00:00:00.000Z' });
      const second = record('pro', { customerId: 'cus_A', createdAt: '2026-11-02T00:00:00.000Z' });
      const revoked = record('pro', { customerId: 'cus_A' });
      const other = record('pro', { customerId: 'cus_B' });
      const alone = record('pro');
      for (const rec of [second, first, revoked, other, alone]) await store.insert(rec);
      await store.revoke(revoked.id, new Date());
      expect((await store.liveKeysOf('cus_A')).map((r) => r.id)).toEqual([first.id, second.id]);
      expect(await store.get(first.id)).toStrictEqual(first);

      const moved = await store.update(first.id, { customerId: 'cus_B' }, new Date('2026-11-20T00:00:00.000Z'));
      expect(moved?.customerId).toBe('cus_B');
      expect(moved?.limits).toStrictEqual(first.limits);
      expect((await store.liveKeysOf('cus_A')).map((r) => r.id)).toEqual([second.id]);
      // `other` was created in 2024, before `first`.
      expect((await store.liveKeysOf('cus_B')).map((r) => r.id)).toEqual([other.id, first.id]);
      // Detached along with an expiry change (the other update path in MongoDB).
      const detached = await store.update(
        second.id,
        { customerId: null, expiresAt: '2099-01-01T00:00:00.000Z' },
        new Date('2026-11-21T00:00:00.000Z'),
      );
      expect(detached).not.toHaveProperty('customerId');
      expect(await store.liveKeysOf('cus_A')).toEqual([]);
      expect(await store.liveKeysOf('cus_none')).toEqual([]);
    });

    it('pages keys newest first, filtered by name prefix, plan, shown prefix, customer and state', async (ctx) => {
      const store = await fresh(ctx);
      const at = (day: number) => `2026-11-${String(day).padStart(2, '0')}T00:00:00.000Z`;
      const made = [
        record('free', { name: 'Acme prod', createdAt: at(1), customerId: 'cus_A' }),
        record('pro', { name: 'acme staging', createdAt: at(2), customerId: 'cus_A' }),
        record('pro', { name: 'Zeta', createdAt: at(3) }),
        record('free', { name: 'A.C.M.E', createdAt: at(4) }),
        record('pro', { name: 'acme ci', createdAt: at(5), customerId: 'cus_A' }),
      ];
      for (const rec of made) await store.insert(rec);
      await store.revoke(made[4]!.id, new Date('2026-11-20T00:00:00.000Z'));
      const ids = async (filter: object, limit = 2) => {
        const seen: string[] = [];
        let after: string | undefined;
        do {
          const page = await store.page(filter, { limit, ...(after ? { after } : {}) });
          expect(page.items.length).toBeLessThanOrEqual(limit);
          seen.push(...page.items.map((r) => r.id));
          after = page.next ?? undefined;
        } while (after);
        return seen;
      };
      const id = (i: number) => made[i]!.id;
      expect(await ids({})).toEqual([id(4), id(3), id(2), id(1), id(0)]);
      expect(await ids({ name: 'ACME' })).toEqual([id(4), id(1), id(0)]);
      expect(await ids({ name: 'a.c' })).toEqual([id(3)]);
      expect(await ids({ plan: 'pro' })).toEqual([id(4), id(2), id(1)]);
      expect(await ids({ customerId: 'cus_A', revoked: false })).toEqual([id(1), id(0)]);
      expect(await ids({ revoked: true })).toEqual([id(4)]);
      expect(await ids({ prefix: made[2]!.prefix })).toEqual([id(2)]);
      // A renamed key is found by its new name only.
      await store.update(id(2), { name: 'Acme renamed' }, new Date('2026-11-21T00:00:00.000Z'));
      expect(await ids({ name: 'acme r' })).toEqual([id(2)]);
      expect(await ids({ name: 'zeta' })).toEqual([]);
      const page = await store.page({}, { limit: 5 });
      expect(page.items[2]).toStrictEqual({ ...made[2], name: 'Acme renamed', updatedAt: '2026-11-21T00:00:00.000Z' });
    });

    it('orders keys made in the same millisecond by id across pages, and new keys never shift a later page', async (ctx) => {
      const store = await fresh(ctx);
      const same = Array.from({ length: 5 }, () => record('free', { createdAt: '2026-11-10T00:00:00.000Z' }));
      for (const rec of same) await store.insert(rec);
      const first = await store.page({}, { limit: 2 });
      // Made after the first page was read: newest, so on no later page.
      await store.insert(record('free', { createdAt: '2026-11-30T00:00:00.000Z' }));
      const rest = await everyKeyAfter(store, first.next as string);
      const expected = same.map((r) => r.id).sort((a, b) => (a < b ? 1 : -1));
      expect([...first.items, ...rest].map((r) => r.id)).toEqual(expected);
    });

    it('combines filters, and refuses a cursor it did not make', async (ctx) => {
      const store = await fresh(ctx);
      const a = record('pro', { name: 'Acme', customerId: 'cus_A', createdAt: '2026-11-01T00:00:00.000Z' });
      const b = record('free', { name: 'Acme', customerId: 'cus_A', createdAt: '2026-11-02T00:00:00.000Z' });
      for (const rec of [a, b]) await store.insert(rec);
      const page = await store.page({ name: 'ac', plan: 'pro', customerId: 'cus_A', revoked: false }, { limit: 5 });
      expect(page).toStrictEqual({ items: [a], next: null });
      for (const after of ['not-a-cursor!', Buffer.from('["x","y"]').toString('base64url'), 'e30', 'x'.repeat(201)]) {
        await expect(store.page({}, { limit: 5, after })).rejects.toBeInstanceOf(BadCursorError);
      }
    });

    it('gives the records of the ids asked for, revoked ones too, leaving unknown ids out', async (ctx) => {
      const store = await fresh(ctx);
      const [a, b, c] = [record('free'), record('pro'), record('business')];
      for (const rec of [a, b, c]) await store.insert(rec);
      await store.revoke(b.id, new Date('2026-11-20T00:00:00.000Z'));
      const got = await store.getMany([a.id, b.id, newKeyId(), a.id]);
      expect(got.map((r) => r.id).sort()).toEqual([a.id, b.id].sort());
      expect(got.find((r) => r.id === b.id)?.revokedAt).toBe('2026-11-20T00:00:00.000Z');
      expect(await store.getMany([])).toEqual([]);
    });

    it('finds the live keys whose expiry falls in a window, bounds included', async (ctx) => {
      const store = await fresh(ctx);
      const expiring = (iso: string) => record('free', { expiresAt: iso });
      const before = expiring('2026-11-09T23:59:59.999Z');
      const atStart = expiring('2026-11-10T00:00:00.000Z');
      const inside = expiring('2026-11-15T00:00:00.000Z');
      const atEnd = expiring('2026-11-20T00:00:00.000Z');
      const after = expiring('2026-11-20T00:00:00.001Z');
      const revoked = expiring('2026-11-15T00:00:00.000Z');
      const never = record('free');
      for (const rec of [before, atStart, inside, atEnd, after, revoked, never]) await store.insert(rec);
      await store.revoke(revoked.id, new Date('2026-11-01T00:00:00.000Z'));
      const found = await store.expiringBetween(
        new Date('2026-11-10T00:00:00.000Z'),
        new Date('2026-11-20T00:00:00.000Z'),
      );
      expect(found.map((r) => r.id).sort()).toEqual([atStart.id, inside.id, atEnd.id].sort());
      expect(found.find((r) => r.id === inside.id)).toStrictEqual(inside);
    });
  });
}
