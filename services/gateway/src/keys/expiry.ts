import { clipped } from '@animal-store/common/errors.js';
import { readRfc3339 } from '@animal-store/common/rfc3339.js';

/**
 * Reads a key expiry as the admin API, the CLI and API_KEYS_FILE take it: RFC 3339 text, which
 * must name a real moment (no 30 February, no 24:00); given `notBefore`, it must also lie after it.
 * Returns the moment as ISO text in UTC, or a problem that names `field`.
 */
export function parseExpiry(
  value: unknown,
  field: string,
  notBefore?: number,
): { expiresAt: string; problem?: undefined } | { problem: string } {
  const example = 'e.g. 2030-12-31T23:59:59Z';
  if (typeof value !== 'string') return { problem: `${field} must be an RFC 3339 timestamp (${example})` };
  const read = readRfc3339(value);
  if (read.problem === 'format') {
    return { problem: `${field} must be an RFC 3339 timestamp (${example}), got "${clipped(value)}"` };
  }
  if (read.problem !== undefined) return { problem: `${field} is not a real date and time: "${clipped(value)}"` };
  const ms = read.ms;
  if (notBefore !== undefined && ms <= notBefore) {
    return {
      problem: `${field} must be in the future (it is ${new Date(ms).toISOString()}, now is ${new Date(notBefore).toISOString()})`,
    };
  }
  return { expiresAt: new Date(ms).toISOString() };
}

/** When a rotated-out secret stops working: after its grace, and never after the key itself. */
export function previousSecretEnds(keyExpiresAt: string | undefined, now: number, graceSeconds: number): string {
  const keyEnds = keyExpiresAt ? Date.parse(keyExpiresAt) : Number.POSITIVE_INFINITY;
  return new Date(Math.min(now + graceSeconds * 1000, keyEnds)).toISOString();
}
