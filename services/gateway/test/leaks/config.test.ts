import { ConfigError } from '@animal-store/common/env.js';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';

const problems = (env: Record<string, string>): string[] => {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
};

describe('LEAK_* settings', () => {
  it('leave the receiver off by default, rotating with an hour’s grace', () => {
    const { leaks } = loadConfig({});
    expect(leaks).toMatchObject({ port: undefined, publicKeys: undefined, graceSeconds: 3_600, response: 'rotate' });
  });

  it('read the listener, the keys, the grace and the responses per plan and customer', () => {
    const { leaks } = loadConfig({
      LEAK_PORT: '8083',
      LEAK_PUBLIC_KEYS: 'https://api.github.com/meta/public_keys/secret_scanning',
      LEAK_GRACE_SECONDS: '600',
      LEAK_RESPONSE: 'notify',
      LEAK_RESPONSE_PLANS: 'free=revoke, pro=rotate',
      LEAK_RESPONSE_CUSTOMERS: 'cus_1=notify',
    });
    expect(leaks.port).toBe(8083);
    expect(leaks.graceSeconds).toBe(600);
    expect([...leaks.byPlan]).toEqual([
      ['free', 'revoke'],
      ['pro', 'rotate'],
    ]);
    expect([...leaks.byCustomer]).toEqual([['cus_1', 'notify']]);
  });

  it('refuse a port without keys, a plain http URL and an unknown response', () => {
    expect(problems({ LEAK_PORT: '8083' })).toContainEqual(expect.stringMatching(/^LEAK_PUBLIC_KEYS .* required/));
    expect(problems({ LEAK_PUBLIC_KEYS: 'http://example.com/keys' })).toContainEqual(
      expect.stringMatching(/^LEAK_PUBLIC_KEYS must be a file path or an https URL/),
    );
    expect(problems({ LEAK_RESPONSE_PLANS: 'free=delete' })).toContainEqual(
      expect.stringMatching(/^LEAK_RESPONSE_PLANS must be/),
    );
    expect(problems({ LEAK_PORT: '8081', LEAK_PUBLIC_KEYS: 'k.json', ADMIN_TOKEN: 'x'.repeat(16) })).toContainEqual(
      expect.stringMatching(/LEAK_PORT/),
    );
  });
});
