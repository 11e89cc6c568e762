import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { generateApiKey, hashApiKey, keyPrefix } from '../../src/keys/api-key.js';
import { createKey } from '../../src/keys/create-key.js';
import { FileKeyStore } from '../../src/keys/file-key-store.js';
import { KeyRuleError, updateKey } from '../../src/keys/key-operations.js';
import type { KeyRecord, Rotation } from '../../src/keys/key-store.js';
import { parseKeysFile, toKeyFileEntry } from '../../src/keys/keys-file.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import { DEFAULT_PLANS } from '../../src/plans/plans.js';

// The key store contract (key-store.contract.ts) cannot run here: a keys file keeps no prefix,
// creation, update or revocation time. What it keeps must change as the memory store changes it.

let dir: string;
let path: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gateway-file-key-store-'));
  path = join(dir, 'keys.json');
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function fileEntries() {
  return parseKeysFile(await readFile(path, 'utf8'), path, DEFAULT_PLANS).keys;
}

function rotation(previousExpiresAt: string): Rotation {
  const key = generateApiKey();
  return { sha256: hashApiKey(key), prefix: keyPrefix(key), previousExpiresAt };
}

describe('FileKeyStore', () => {
  it('keeps what a keys file holds of every change exactly as the memory store makes it', async () => {
    const file = new FileKeyStore(path, DEFAULT_PLANS);
    const memory = new MemoryKeyStore();
    const { record } = createKey({
      plan: 'enterprise',
      name: 'acme',
      limits: { perMinute: 5, perDay: 50 },
      expiresAt: '2031-01-01T00:00:00.000Z',
    });
    await file.insert(record);
    await memory.insert(record);
    const other = createKey({ plan: 'free' }).record;
    await file.insert(other);
    await memory.insert(other);

    const at = new Date('2030-01-01T00:00:00.000Z');
    const steps: Array<(store: FileKeyStore | MemoryKeyStore) => Promise<KeyRecord | null>> = [
      (store) => store.rotate(record.id, rotation('2030-06-01T00:00:00.000Z'), at),
      (store) => store.update(record.id, { expiresAt: '2030-03-01T00:00:00.000Z' }, at),
      // Clearing the expiry folds it into the previous secret's end.
      (store) => store.update(record.id, { expiresAt: null, name: 'acme two' }, at),
      (store) => store.update(record.id, { plan: 'pro', limits: null }, at),
      // A second rotation ends the first previous secret.
      (store) => store.rotate(record.id, rotation('2030-01-02T00:00:00.000Z'), at),
    ];
    for (const step of steps) {
      const made = await step(memory);
      const written = await step(file);
      expect(written).not.toBeNull();
      // Each rotation brings its own secret; everything else matches.
      const comparable = (r: KeyRecord | null) => {
        const { sha256: _s, previous, ...rest } = toKeyFileEntry(r as KeyRecord);
        return { ...rest, previousEnds: previous?.expiresAt };
      };
      expect(comparable(written)).toStrictEqual(comparable(made));
    }
    const [entry, untouched] = await fileEntries();
    expect(entry).toStrictEqual(toKeyFileEntry((await file.get(record.id)) as KeyRecord));
    expect(entry).toMatchObject({ name: 'acme two', plan: 'pro', previous: { expiresAt: '2030-01-02T00:00:00.000Z' } });
    expect(entry).not.toHaveProperty('limits');
    expect(entry).not.toHaveProperty('expiresAt');
    expect(untouched).toStrictEqual(toKeyFileEntry(other));
  });

  it('rotates to the new hash, keeping the replaced one as previous and no prefix', async () => {
    const store = new FileKeyStore(path, DEFAULT_PLANS);
    const { record } = createKey({ plan: 'business' });
    await store.insert(record);
    const next = rotation('2030-01-02T00:00:00.000Z');
    const rotated = await store.rotate(record.id, next, new Date('2030-01-01T00:00:00.000Z'));
    expect(rotated).toStrictEqual({
      id: record.id,
      name: record.name,
      plan: 'business',
      sha256: next.sha256,
      previous: { sha256: record.sha256, expiresAt: '2030-01-02T00:00:00.000Z' },
      createdAt: '2030-01-01T00:00:00.000Z',
    });
    expect(await fileEntries()).toStrictEqual([toKeyFileEntry(rotated as KeyRecord)]);
  });

  it('answers null for an id the file does not hold, and leaves the file as it was', async () => {
    const store = new FileKeyStore(path, DEFAULT_PLANS);
    expect(await store.get('key_nope')).toBeNull();
    expect(await store.update('key_nope', { name: 'x' }, new Date())).toBeNull();
    await store.insert(createKey({ plan: 'free' }).record);
    const before = await readFile(path, 'utf8');
    expect(await store.get('key_nope')).toBeNull();
    expect(await store.update('key_nope', { name: 'x' }, new Date())).toBeNull();
    expect(await store.rotate('key_nope', rotation('2030-01-02T00:00:00.000Z'), new Date())).toBeNull();
    expect(await readFile(path, 'utf8')).toBe(before);
  });

  it('fails a lookup when the keys file cannot be read, instead of answering that it holds no such key', async () => {
    // The path is a directory: reading it fails with EISDIR, not ENOENT.
    const store = new FileKeyStore(dir, DEFAULT_PLANS);
    await expect(store.get('key_any')).rejects.toThrow(/EISDIR/);
  });

  it('refuses through the key rules what the admin API refuses, writing nothing', async () => {
    const store = new FileKeyStore(path, DEFAULT_PLANS);
    await store.insert(createKey({ plan: 'free' }).record);
    const before = await readFile(path, 'utf8');
    const [entry] = await fileEntries();
    const current = (await store.get(entry?.id as string)) as KeyRecord;
    await expect(updateKey(DEFAULT_PLANS, store, current, { plan: 'enterprise' }, Date.now())).rejects.toThrow(
      new KeyRuleError('enterprise keys need limits { perSecond, perMinute, perHour, perDay, perMonth }'),
    );
    await expect(
      updateKey(DEFAULT_PLANS, store, current, { expiresAt: '2020-01-01T00:00:00Z' }, Date.now()),
    ).rejects.toThrow(/expiresAt must be in the future/);
    expect(await readFile(path, 'utf8')).toBe(before);
  });

  it('never writes a file a gateway would refuse: a change made from a stale read fails instead', async () => {
    const store = new FileKeyStore(path, DEFAULT_PLANS);
    const { record } = createKey({ plan: 'enterprise', limits: { perMinute: 5, perDay: 50 } });
    await store.insert(record);
    const stale = (await store.get(record.id)) as KeyRecord;
    // Another writer moves the key off enterprise after this one read it.
    await store.update(record.id, { plan: 'pro', limits: null }, new Date());
    const before = await readFile(path, 'utf8');
    // Fine for the enterprise key it read (its own minute alone); on pro, above pro's 10,000 a day.
    await expect(updateKey(DEFAULT_PLANS, store, stale, { limits: { perMinute: 20_000 } }, Date.now())).rejects.toThrow(
      /limits.perMinute cannot exceed limits.perDay/,
    );
    expect(await readFile(path, 'utf8')).toBe(before);
  });
});
