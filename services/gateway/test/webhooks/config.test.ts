import { ConfigError } from '@animal-store/common/env.js';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';

/** The WEBHOOKS_* variables as an operator sets them: defaults, values read, and every problem named. */
describe('webhook settings', () => {
  it('default to https public endpoints, an 80 % warning, retries from 5 s doubling to 1 h for a day', () => {
    expect(loadConfig({}).webhooks).toEqual({
      allowInsecure: false,
      allowPrivate: false,
      quotaWarningPercents: [80],
      retryBaseMs: 5_000,
      retryMaxDelayMs: 3_600_000,
      retryForMs: 86_400_000,
      timeoutMs: 10_000,
      expiryScanMs: 300_000,
    });
  });

  it('read each variable, the warning percentages ascending and each once, seconds as milliseconds', () => {
    const config = loadConfig({
      WEBHOOKS_ALLOW_INSECURE: 'true',
      WEBHOOKS_ALLOW_PRIVATE: 'true',
      WEBHOOKS_QUOTA_WARNING_PERCENT: ' 90, 50,50,1,99',
      WEBHOOKS_RETRY_BASE_MS: '250',
      WEBHOOKS_RETRY_MAX_DELAY_MS: '250',
      WEBHOOKS_RETRY_FOR_SECONDS: '60',
      WEBHOOKS_TIMEOUT_MS: '100',
      WEBHOOKS_EXPIRY_SCAN_SECONDS: '1',
    });
    expect(config.webhooks).toEqual({
      allowInsecure: true,
      allowPrivate: true,
      quotaWarningPercents: [1, 50, 90, 99],
      retryBaseMs: 250,
      retryMaxDelayMs: 250,
      retryForMs: 60_000,
      timeoutMs: 100,
      expiryScanMs: 1_000,
    });
  });

  it('name every problem at once: each bad percentage, a maximum delay below the base', () => {
    let error: unknown;
    try {
      loadConfig({
        WEBHOOKS_QUOTA_WARNING_PERCENT: '0,100,5.5,x,80,',
        WEBHOOKS_RETRY_BASE_MS: '2000',
        WEBHOOKS_RETRY_MAX_DELAY_MS: '1999',
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const bad = (entry: string) =>
      `WEBHOOKS_QUOTA_WARNING_PERCENT must be whole percentages from 1 to 99, comma-separated, got "${entry}"`;
    expect((error as ConfigError).problems).toEqual([
      bad('0'),
      bad('100'),
      bad('5.5'),
      bad('x'),
      bad(''),
      'WEBHOOKS_RETRY_MAX_DELAY_MS must be at least WEBHOOKS_RETRY_BASE_MS',
    ]);
  });
});
