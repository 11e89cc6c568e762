import type { EnvReader } from '@animal-store/common/env.js';

export interface WebhooksConfig {
  /** WEBHOOKS_ALLOW_INSECURE: http:// endpoints (tests, a local receiver). */
  allowInsecure: boolean;
  /** WEBHOOKS_ALLOW_PRIVATE: endpoints on loopback, link-local or private addresses. */
  allowPrivate: boolean;
  /** Percentages of a day or month window below 100 that send key.quota.warning, ascending. */
  quotaWarningPercents: number[];
  /** First retry's delay; each later one doubles, up to retryMaxDelayMs, with jitter. */
  retryBaseMs: number;
  retryMaxDelayMs: number;
  /** How long a delivery is retried before its endpoint is marked failing. */
  retryForMs: number;
  /** One attempt's bound: connect, headers and body. */
  timeoutMs: number;
  /** How often a replica looks for keys about to expire (one replica acts per round). */
  expiryScanMs: number;
}

/** WEBHOOKS_QUOTA_WARNING_PERCENT: comma-separated whole percentages, 1 to 99 (default 80). */
function parsePercents(r: EnvReader): number[] {
  const raw = r.string('WEBHOOKS_QUOTA_WARNING_PERCENT', '80');
  const out: number[] = [];
  for (const entry of raw.split(',').map((s) => s.trim())) {
    const n = Number(entry);
    if (!/^\d{1,2}$/.test(entry) || n < 1 || n > 99) {
      r.problems.push(
        `WEBHOOKS_QUOTA_WARNING_PERCENT must be whole percentages from 1 to 99, comma-separated, got "${entry}"`,
      );
      continue;
    }
    if (!out.includes(n)) out.push(n);
  }
  return out.sort((a, b) => a - b);
}

/** The WEBHOOKS_* variables; every problem goes to the reader's list like the rest of the config. */
export function parseWebhooksConfig(r: EnvReader): WebhooksConfig {
  const flag = (name: string) => r.oneOf(name, ['true', 'false'] as const, 'false') === 'true';
  const config: WebhooksConfig = {
    allowInsecure: flag('WEBHOOKS_ALLOW_INSECURE'),
    allowPrivate: flag('WEBHOOKS_ALLOW_PRIVATE'),
    quotaWarningPercents: parsePercents(r),
    retryBaseMs: r.int('WEBHOOKS_RETRY_BASE_MS', 5_000, 1, 3_600_000),
    retryMaxDelayMs: r.int('WEBHOOKS_RETRY_MAX_DELAY_MS', 3_600_000, 1, 86_400_000),
    retryForMs: r.int('WEBHOOKS_RETRY_FOR_SECONDS', 86_400, 1, 30 * 86_400) * 1000,
    timeoutMs: r.int('WEBHOOKS_TIMEOUT_MS', 10_000, 100, 60_000),
    expiryScanMs: r.int('WEBHOOKS_EXPIRY_SCAN_SECONDS', 300, 1, 86_400) * 1000,
  };
  r.require(
    config.retryMaxDelayMs >= config.retryBaseMs,
    'WEBHOOKS_RETRY_MAX_DELAY_MS must be at least WEBHOOKS_RETRY_BASE_MS',
  );
  return config;
}
