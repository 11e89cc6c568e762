import type { KeyRecord } from '../../keys/key-store.js';

const DAY_MS = 86_400_000;

/** How long after its expiry a key still gets key.expired (a scan missed during an outage). */
const EXPIRED_LOOKBACK_MS = 7 * DAY_MS;

export interface ExpiryNotice {
  type: 'key.expiring' | 'key.expired';
  /** Once per key, expiry and notice, on every replica. */
  marker: string;
  markerTtlMs: number;
  /** For key.expiring: the whole days left, rounded up (a key that expires in 12 hours has 1). */
  days?: number;
}

/** When the keys that may be due a notice at `now` expire: what the scan asks the key store for. */
export function noticeWindow(now: number): { from: Date; to: Date } {
  return { from: new Date(now - EXPIRED_LOOKBACK_MS), to: new Date(now + 7 * DAY_MS) };
}

/**
 * The notice a key is due, if any: key.expiring 7 days and 1 day before its expiry (only the
 * nearer one when both are due, as for a key made 3 days before it expires), key.expired once it
 * has. A changed expiry is a new one, with notices of its own.
 */
export function expiryNotice(record: KeyRecord, now: number): ExpiryNotice | undefined {
  if (!record.expiresAt || record.revokedAt) return undefined;
  const expiresAt = Date.parse(record.expiresAt);
  if (Number.isNaN(expiresAt)) return undefined;
  const left = expiresAt - now;
  const base = `${record.id}.${expiresAt}`;
  const markerTtlMs = Math.max(left, 0) + EXPIRED_LOOKBACK_MS + DAY_MS;
  if (left <= 0) {
    if (-left > EXPIRED_LOOKBACK_MS) return undefined;
    return { type: 'key.expired', marker: `expired.${base}`, markerTtlMs };
  }
  // The notice is named for its threshold (one each per expiry); what it says is the time left.
  const days = Math.ceil(left / DAY_MS);
  if (left <= DAY_MS) return { type: 'key.expiring', marker: `expiring1.${base}`, markerTtlMs, days };
  if (left <= 7 * DAY_MS) return { type: 'key.expiring', marker: `expiring7.${base}`, markerTtlMs, days };
  return undefined;
}
