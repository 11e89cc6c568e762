import type { Limits, Plan } from '../plans.js';
import { generateApiKey, hashApiKey, keyPrefix, newKeyId } from './api-key.js';
import type { KeyRecord } from './key-store.js';

/** A fresh secret and what is stored of it: its hash, and a prefix people can recognise. */
export interface Secret {
  key: string;
  sha256: string;
  prefix: string;
}

export function newSecret(): Secret {
  const key = generateApiKey();
  return { key, sha256: hashApiKey(key), prefix: keyPrefix(key) };
}

export interface NewKey {
  plan: Plan;
  name?: string | undefined;
  /** Enterprise only; callers check planProblem first. */
  limits?: Limits | undefined;
  /** ISO text, already validated (parseExpiry). */
  expiresAt?: string | undefined;
}

/**
 * The one place a key and its record are made (admin API, CLI, `npm start`'s demo keys, bench,
 * tests): the plaintext `key` is handed out once and only its hash is kept.
 */
export function createKey(input: NewKey, now: Date = new Date()): { key: string; record: KeyRecord } {
  const { key, sha256, prefix } = newSecret();
  const id = newKeyId();
  return {
    key,
    record: {
      id,
      name: input.name ?? id,
      plan: input.plan,
      ...(input.limits ? { limits: { perMinute: input.limits.perMinute, perDay: input.limits.perDay } } : {}),
      sha256,
      prefix,
      createdAt: now.toISOString(),
      ...(input.expiresAt ? { expiresAt: input.expiresAt } : {}),
    },
  };
}
