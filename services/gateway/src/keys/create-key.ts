import type { Limits, Plan, Scope } from '../plans/plans.js';
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
  /** The key's own limits over its plan's; callers check planProblem first. */
  limits?: Limits | undefined;
  scopes?: Scope[] | undefined;
  /** Normalised CIDRs (keys/cidrs.ts). */
  allowedCidrs?: string[] | undefined;
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
      ...(input.limits ? { limits: { ...input.limits } } : {}),
      ...(input.scopes ? { scopes: [...input.scopes] } : {}),
      ...(input.allowedCidrs ? { allowedCidrs: [...input.allowedCidrs] } : {}),
      sha256,
      prefix,
      createdAt: now.toISOString(),
      ...(input.expiresAt ? { expiresAt: input.expiresAt } : {}),
    },
  };
}
