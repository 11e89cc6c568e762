import type { EnvReader } from '@animal-store/common/env.js';

/** What the gateway does with a key proven leaked (docs/leaks.md). */
export const LEAK_RESPONSES = ['notify', 'rotate', 'revoke'] as const;
export type LeakResponse = (typeof LEAK_RESPONSES)[number];

export interface LeaksConfig {
  /** The secret-scanning receiver's listener; undefined (LEAK_PORT unset): no receiver. */
  host: string;
  port: number | undefined;
  /** A file path or an https URL of GitHub's partner keys document (LEAK_PUBLIC_KEYS). */
  publicKeys: string | undefined;
  /** How long the keys document is trusted before it is read again. */
  publicKeysTtlMs: number;
  /** How long a rotated-out leaked secret keeps working (LEAK_GRACE_SECONDS). */
  graceSeconds: number;
  /** A report's body seen again within this long is a replay, refused (LEAK_REPLAY_WINDOW_SECONDS). */
  replayWindowMs: number;
  /** LEAK_RESPONSE, and its overrides per plan and per customer (the customer's wins). */
  response: LeakResponse;
  byPlan: ReadonlyMap<string, LeakResponse>;
  byCustomer: ReadonlyMap<string, LeakResponse>;
}

/** `name=response,name=response`, each response one of LEAK_RESPONSES. */
function responseMap(r: EnvReader, variable: string): Map<string, LeakResponse> {
  const map = new Map<string, LeakResponse>();
  const text = r.string(variable);
  if (text === undefined || text.trim() === '') return map;
  for (const part of text.split(',')) {
    const [name, response, ...rest] = part.trim().split('=');
    if (!name || rest.length > 0 || !(LEAK_RESPONSES as readonly string[]).includes(response ?? '')) {
      r.problems.push(`${variable} must be name=${LEAK_RESPONSES.join('|')} pairs separated by commas, got "${part}"`);
      continue;
    }
    map.set(name, response as LeakResponse);
  }
  return map;
}

/** LEAK_*: the receiver is off unless LEAK_PORT is set, and then needs LEAK_PUBLIC_KEYS. */
export function parseLeaksConfig(r: EnvReader): LeaksConfig {
  const portSet = r.string('LEAK_PORT') !== undefined;
  const port = portSet ? r.int('LEAK_PORT', 8083, 0, 65535) : undefined;
  const publicKeys = r.string('LEAK_PUBLIC_KEYS');
  r.require(
    !portSet || publicKeys !== undefined,
    'LEAK_PUBLIC_KEYS (a file or https URL of the partner public keys) is required when LEAK_PORT is set',
  );
  r.require(
    publicKeys === undefined || !/^[a-z]+:/i.test(publicKeys) || /^https:\/\//i.test(publicKeys),
    `LEAK_PUBLIC_KEYS must be a file path or an https URL, got "${publicKeys}"`,
  );
  return {
    host: r.host('LEAK_HOST', '0.0.0.0'),
    port,
    publicKeys,
    publicKeysTtlMs: r.int('LEAK_PUBLIC_KEYS_TTL_SECONDS', 3_600, 60, 86_400) * 1000,
    graceSeconds: r.int('LEAK_GRACE_SECONDS', 3_600, 0, 86_400),
    replayWindowMs: r.int('LEAK_REPLAY_WINDOW_SECONDS', 86_400, 60, 7 * 86_400) * 1000,
    response: r.oneOf('LEAK_RESPONSE', LEAK_RESPONSES, 'rotate'),
    byPlan: responseMap(r, 'LEAK_RESPONSE_PLANS'),
    byCustomer: responseMap(r, 'LEAK_RESPONSE_CUSTOMERS'),
  };
}
