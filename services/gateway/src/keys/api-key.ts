import { hash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * Key format: `ask_` + 40 base62 characters of randomness (~238 bits) + 6 base62 characters of
 * CRC32 over the random part. The prefix lets secret scanners and people recognise a key; the
 * checksum lets the gateway refuse typos and garbage without touching the store or Redis.
 */
export const KEY_PREFIX = 'ask_';
const BODY_LENGTH = 40;
const CHECK_LENGTH = 6;
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_PATTERN = new RegExp(`^${KEY_PREFIX}[0-9A-Za-z]{${BODY_LENGTH + CHECK_LENGTH}}$`);
export const KEY_LENGTH = KEY_PREFIX.length + BODY_LENGTH + CHECK_LENGTH;

function base62(value: number, width: number): string {
  let out = '';
  let rest = value;
  for (let i = 0; i < width; i++) {
    out = ALPHABET[rest % 62] + out;
    rest = Math.floor(rest / 62);
  }
  return out;
}

function checksum(body: string): string {
  return base62(crc32(body), CHECK_LENGTH);
}

function randomBase62(length: number): string {
  // Rejection sampling on bytes keeps every character uniformly likely.
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += ALPHABET[byte % 62];
    }
  }
  return out;
}

export function generateApiKey(): string {
  const body = randomBase62(BODY_LENGTH);
  return `${KEY_PREFIX}${body}${checksum(body)}`;
}

/** True when the text has the key shape and its checksum matches; says nothing about existence. */
export function isWellFormedApiKey(key: string): boolean {
  if (key.length !== KEY_LENGTH || !KEY_PATTERN.test(key)) return false;
  const body = key.slice(KEY_PREFIX.length, KEY_PREFIX.length + BODY_LENGTH);
  return checksum(body) === key.slice(KEY_PREFIX.length + BODY_LENGTH);
}

/** Runs on every keyed request: the one-shot hash() costs a third of a Hash object's update/digest. */
export function hashApiKey(key: string): string {
  return hash('sha256', key, 'hex');
}

/**
 * Constant-time comparison of two secrets as text (hex SHA-256 digests, the admin token). Compares
 * the text itself: decoding as hex would stop at the first non-hex character, making different
 * strings equal (or lengths differ).
 */
export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The first characters of a key, safe to log and show: enough to tell keys apart, useless to an attacker. */
export function keyPrefix(key: string): string {
  return key.slice(0, KEY_PREFIX.length + 6);
}

export function newKeyId(): string {
  let id = 'key_';
  for (let i = 0; i < 16; i++) id += ALPHABET[randomInt(62)];
  return id;
}
