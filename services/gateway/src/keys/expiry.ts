import { clipped } from '@animal-store/common/errors.js';

/** RFC 3339 date-time: a full date, a full time, and a zone (Z or an offset). */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * Reads a key expiry as the admin API, the CLI and API_KEYS_FILE take it: RFC 3339 text, which
 * must name a real moment (no 30 February); given `notBefore`, it must also lie after it.
 * Returns the moment as ISO text in UTC, or a problem that names `field`.
 */
export function parseExpiry(
  value: unknown,
  field: string,
  notBefore?: number,
): { expiresAt: string; problem?: undefined } | { problem: string } {
  const example = 'e.g. 2030-12-31T23:59:59Z';
  if (typeof value !== 'string') return { problem: `${field} must be an RFC 3339 timestamp (${example})` };
  const m = RFC3339.exec(value);
  const ms = Date.parse(value.replace(' ', 'T'));
  if (!m || Number.isNaN(ms)) {
    return { problem: `${field} must be an RFC 3339 timestamp (${example}), got "${clipped(value)}"` };
  }
  // Date.parse rolls 2026-02-30 over to March; a date that does not exist is a typo, not a moment.
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 59) {
    return { problem: `${field} is not a real date and time: "${clipped(value)}"` };
  }
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
