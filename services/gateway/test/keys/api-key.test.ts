import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  generateApiKey,
  hashApiKey,
  isWellFormedApiKey,
  KEY_LENGTH,
  KEY_PREFIX,
  keyPrefix,
  newKeyId,
  sameSecret,
} from '../../src/keys/api-key.js';
import { createKey } from '../../src/keys/create-key.js';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function replaceAt(text: string, index: number, char: string): string {
  return text.slice(0, index) + char + text.slice(index + 1);
}

describe('generateApiKey', () => {
  it('makes ask_ + 46 base62 characters that pass the well-formedness check', () => {
    const key = generateApiKey();
    expect(KEY_PREFIX).toBe('ask_');
    expect(KEY_LENGTH).toBe(50);
    expect(key).toMatch(/^ask_[0-9A-Za-z]{46}$/);
    expect(isWellFormedApiKey(key)).toBe(true);
  });

  it('uses every character of the alphabet in the random part', () => {
    const seen = new Set(Array.from({ length: 200 }, () => generateApiKey().slice(KEY_PREFIX.length, -6)).join(''));
    expect([...seen].sort().join('')).toBe([...ALPHABET].sort().join(''));
  });

  it('never repeats itself in 1000 keys', () => {
    const keys = new Set(Array.from({ length: 1000 }, () => generateApiKey()));
    expect(keys.size).toBe(1000);
    for (const key of keys) expect(isWellFormedApiKey(key)).toBe(true);
  });
});

describe('isWellFormedApiKey', () => {
  it('checks the documented format: ask_, 40 base62 characters, their CRC32 in 6 base62 digits', () => {
    // Worked out apart from this code (zlib CRC32 1929054560 = 26Y7DE in base62, most significant
    // digit first): secret scanners and other tools check keys the same way.
    expect(isWellFormedApiKey('ask_0123456789ABCDEFGHIJKLMNOPQRSTabcdefghij26Y7DE')).toBe(true);
    expect(isWellFormedApiKey('ask_0123456789ABCDEFGHIJKLMNOPQRSTabcdefghij00000E')).toBe(false);
  });

  it('refuses every single-character change in the body or the checksum (typos are caught)', () => {
    for (let round = 0; round < 5; round++) {
      const key = generateApiKey();
      for (let i = KEY_PREFIX.length; i < key.length; i++) {
        const current = key[i] as string;
        // The neighbouring character in the alphabet, and the same letter in the other case when there is one.
        const next = ALPHABET[(ALPHABET.indexOf(current) + 1) % ALPHABET.length] as string;
        const swapped = current === current.toLowerCase() ? current.toUpperCase() : current.toLowerCase();
        for (const replacement of new Set([next, swapped])) {
          if (replacement === current) continue;
          const typo = replaceAt(key, i, replacement);
          expect(isWellFormedApiKey(typo), `${key} with position ${i} changed to ${replacement}`).toBe(false);
        }
      }
    }
  });

  it('refuses two adjacent characters swapped', () => {
    const key = generateApiKey();
    for (let i = KEY_PREFIX.length; i < key.length - 1; i++) {
      if (key[i] === key[i + 1]) continue;
      const swapped = key.slice(0, i) + key[i + 1] + key[i] + key.slice(i + 2);
      expect(isWellFormedApiKey(swapped)).toBe(false);
    }
  });

  it('refuses a wrong prefix', () => {
    const key = generateApiKey();
    const body = key.slice(KEY_PREFIX.length);
    for (const prefix of ['ASK_', 'ask-', 'sk__', 'asx_', '']) {
      expect(isWellFormedApiKey(prefix + body), prefix).toBe(false);
    }
  });

  it('refuses a wrong length', () => {
    const key = generateApiKey();
    expect(isWellFormedApiKey(key.slice(0, -1))).toBe(false);
    expect(isWellFormedApiKey(`${key}0`)).toBe(false);
    expect(isWellFormedApiKey(key.slice(0, KEY_PREFIX.length + 40))).toBe(false);
    expect(isWellFormedApiKey('')).toBe(false);
    expect(isWellFormedApiKey(KEY_PREFIX)).toBe(false);
  });

  it('refuses characters outside base62', () => {
    const key = generateApiKey();
    for (const bad of ['-', '_', '+', '/', '=', ' ', 'é', '\n']) {
      expect(isWellFormedApiKey(replaceAt(key, 10, bad)), JSON.stringify(bad)).toBe(false);
    }
    expect(isWellFormedApiKey(` ${key.slice(1)}`)).toBe(false);
  });
});

describe('hashApiKey', () => {
  it('is the hex SHA-256 of the key, and stable', () => {
    const key = generateApiKey();
    const hash = hashApiKey(key);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(hash).toBe(createHash('sha256').update(key).digest('hex'));
    expect(hashApiKey(key)).toBe(hash);
    expect(hashApiKey('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('differs between keys', () => {
    expect(hashApiKey(generateApiKey())).not.toBe(hashApiKey(generateApiKey()));
  });
});

describe('sameSecret', () => {
  it('is true for equal digests and false for different ones', () => {
    const a = hashApiKey(generateApiKey());
    const b = hashApiKey(generateApiKey());
    expect(sameSecret(a, a)).toBe(true);
    expect(sameSecret(a, `${a}`)).toBe(true);
    expect(sameSecret(a, b)).toBe(false);
    expect(sameSecret(a, replaceAt(a, 63, a[63] === '0' ? '1' : '0'))).toBe(false);
    expect(sameSecret(a, a.slice(0, 62))).toBe(false);
    expect(sameSecret(a, '')).toBe(false);
  });

  it('is false, and does not throw, when either side is not hex', () => {
    const a = hashApiKey(generateApiKey());
    // Hex decoding stops at the first bad character: these used to compare as equal, or throw.
    expect(sameSecret('z'.repeat(64), 'y'.repeat(64))).toBe(false);
    expect(sameSecret(a, replaceAt(a, 63, 'g'))).toBe(false);
    expect(sameSecret(a, a.toUpperCase())).toBe(false);
  });
});

describe('keyPrefix and newKeyId', () => {
  it('shows the prefix and six characters of the key, no more', () => {
    const key = generateApiKey();
    expect(keyPrefix(key)).toBe(key.slice(0, 10));
    expect(keyPrefix(key)).toMatch(/^ask_[0-9A-Za-z]{6}$/);
  });

  it('makes distinct key_ ids', () => {
    const ids = new Set(Array.from({ length: 1000 }, () => newKeyId()));
    expect(ids.size).toBe(1000);
    for (const id of ids) expect(id).toMatch(/^key_[0-9A-Za-z]{16}$/);
  });
});

describe('createKey', () => {
  it('hands out the key once and keeps only its hash and prefix, with the given fields', () => {
    const limits = { perMinute: 5, perDay: 50 };
    const now = new Date('2030-01-02T03:04:05.678Z');
    const { key, record } = createKey(
      { plan: 'enterprise', name: 'acme', limits, expiresAt: '2031-01-01T00:00:00.000Z' },
      now,
    );
    expect(isWellFormedApiKey(key)).toBe(true);
    expect(record).toStrictEqual({
      id: record.id,
      name: 'acme',
      plan: 'enterprise',
      limits: { perMinute: 5, perDay: 50 },
      sha256: hashApiKey(key),
      prefix: keyPrefix(key),
      createdAt: '2030-01-02T03:04:05.678Z',
      expiresAt: '2031-01-01T00:00:00.000Z',
    });
    expect(record.id).toMatch(/^key_[0-9A-Za-z]{16}$/);
    // A copy: changing the caller's limits later changes nothing stored.
    limits.perMinute = 999;
    expect(record.limits?.perMinute).toBe(5);
    expect(JSON.stringify(record)).not.toContain(key);
  });

  it('names a key after its id when given no name, and adds no limits or expiry it was not given', () => {
    const { record } = createKey({ plan: 'pro' });
    expect(record.name).toBe(record.id);
    expect(record).not.toHaveProperty('limits');
    expect(record).not.toHaveProperty('expiresAt');
  });
});
