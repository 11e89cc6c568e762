import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/keys/key-store.js';
import type { WindowState } from '../../src/limits/key-limiter.js';
import type { FanOut } from '../../src/webhooks/fan-out.js';
import { expiryNotice } from '../../src/webhooks/intake/expiry-notices.js';
import { KeyEvents } from '../../src/webhooks/intake/key-events.js';
import { quotaCrossings } from '../../src/webhooks/intake/quota-crossings.js';

/** What turns into webhook events: the quota thresholds a request crosses, the expiry notice a key is due. */

const DAY_MS = 86_400_000;
const NOON = Date.UTC(2026, 10, 26, 12);
const MIDNIGHT = Date.UTC(2026, 10, 27);

const window = (
  name: WindowState['name'],
  limit: number,
  remaining: number,
  scope: WindowState['scope'] = 'key',
): WindowState => ({
  name,
  scope,
  limit,
  remaining,
  windowSeconds: 86_400,
  resetAt: MIDNIGHT,
});

describe('the quota thresholds a request crosses', () => {
  it('are those below its day’s or month’s use before it and reached with it, 100 % the last', () => {
    // 7 used of 10 before a request costing 3: 80 % (at 8) and 100 % (at 10) are crossed, 50 % was before.
    expect(quotaCrossings([window('day', 10, 0)], 3, [50, 80])).toEqual([
      { window: 'day', limit: 10, used: 10, resetAt: new Date(MIDNIGHT).toISOString(), threshold: 80 },
      { window: 'day', limit: 10, used: 10, resetAt: new Date(MIDNIGHT).toISOString(), threshold: 100 },
    ]);
    // Exactly at a threshold counts as crossing it; one short does not.
    expect(quotaCrossings([window('month', 10, 2)], 1, [80])?.map((q) => [q.window, q.threshold])).toEqual([
      ['month', 80],
    ]);
    expect(quotaCrossings([window('month', 10, 3)], 1, [80])).toBeUndefined();
    // Already past it before this request: nothing new.
    expect(quotaCrossings([window('day', 10, 1)], 1, [80])).toBeUndefined();
  });

  it('rounds a threshold’s count up: 80 % of 7 is reached at 6', () => {
    expect(quotaCrossings([window('day', 7, 2)], 1, [80])).toBeUndefined();
    expect(quotaCrossings([window('day', 7, 1)], 1, [80])?.map((q) => q.used)).toEqual([6]);
  });

  it('ignore the second, minute and hour windows and the per-address one', () => {
    const full = (['second', 'minute', 'hour', 'anonymous'] as const).map((n) => window(n, 10, 0));
    expect(quotaCrossings(full, 10, [80])).toBeUndefined();
    expect(quotaCrossings([...full, window('day', 100, 20)], 1, [80])?.map((q) => q.window)).toEqual(['day']);
  });

  it('name the reset on its minute, so that every replica names the same period', () => {
    const late = { ...window('day', 10, 0), resetAt: MIDNIGHT + 29_999 };
    const early = { ...window('day', 10, 0), resetAt: MIDNIGHT - 30_000 };
    expect(quotaCrossings([late], 1, [])?.[0]?.resetAt).toBe(new Date(MIDNIGHT).toISOString());
    expect(quotaCrossings([early], 1, [])?.[0]?.resetAt).toBe(new Date(MIDNIGHT).toISOString());
  });
});

describe('the quota events of a customer’s shared windows', () => {
  const record = (id: string): KeyRecord => ({
    id,
    name: id,
    plan: 'pro',
    sha256: '0'.repeat(64),
    createdAt: new Date(NOON).toISOString(),
    customerId: 'cus_acme',
  });
  /** What the intake hands the fan-out: each event's type, data and once-marker. */
  const intake = () => {
    const emitted: Array<{ type: string; data: Record<string, unknown>; marker: string | undefined }> = [];
    const fanOut = {
      emit: async (type: string, key: object, data: object, once?: { marker: string }) => {
        emitted.push({ type, data: { ...key, ...data }, marker: once?.marker });
      },
    };
    const keys = { get: async () => null, expiringBetween: async () => [] };
    const events = new KeyEvents(fanOut as unknown as FanOut, keys, [80], console as never, () => NOON);
    return { events, emitted };
  };

  it('are the customer’s: marked by it (one event whichever key crosses), carrying customerId and its reset', () => {
    const { events, emitted } = intake();
    // The customer's day at 8 of 10 after key_a's request; key_b's own day crosses nothing.
    events.onAdmitted(record('key_a'), [window('day', 10, 2, 'customer'), window('day', 100, 90)], 1);
    // The same crossing seen again through another key (a retried or fallback decision): the same marker.
    events.onAdmitted(record('key_b'), [window('day', 10, 2, 'customer')], 1);
    expect(emitted.map((e) => e.marker)).toEqual([
      `quota.cus_acme.customer.day.${MIDNIGHT}.80`,
      `quota.cus_acme.customer.day.${MIDNIGHT}.80`,
    ]);
    expect(emitted[0]).toMatchObject({
      type: 'key.quota.warning',
      data: { keyId: 'key_a', customerId: 'cus_acme', scope: 'customer', window: 'day', limit: 10, used: 8 },
    });
    expect(emitted[0]?.data.resetAt).toBe(new Date(MIDNIGHT).toISOString());
  });

  it('leave a key’s own windows the key’s, whether or not it has a customer', () => {
    const { events, emitted } = intake();
    events.onAdmitted(record('key_a'), [window('day', 10, 2)], 1);
    expect(emitted.map((e) => e.marker)).toEqual([`quota.key_a.day.${MIDNIGHT}.80`]);
    expect(emitted[0]?.data).not.toHaveProperty('scope');
  });
});

describe('the expiry notice a key is due', () => {
  const key = (expiresAt: number | undefined, extra: Partial<KeyRecord> = {}): KeyRecord => ({
    id: 'key_a',
    name: 'a',
    plan: 'free',
    sha256: '0'.repeat(64),
    createdAt: new Date(NOON - 30 * DAY_MS).toISOString(),
    ...(expiresAt === undefined ? {} : { expiresAt: new Date(expiresAt).toISOString() }),
    ...extra,
  });
  const due = (expiresAt: number | undefined, extra?: Partial<KeyRecord>) => {
    const notice = expiryNotice(key(expiresAt, extra), NOON);
    return notice && [notice.type, notice.days];
  };

  it('is key.expiring from 7 days before, with the whole days left rounded up', () => {
    expect(due(NOON + 7 * DAY_MS + 1)).toBeUndefined();
    expect(due(NOON + 7 * DAY_MS)).toEqual(['key.expiring', 7]);
    expect(due(NOON + 2 * DAY_MS + 1)).toEqual(['key.expiring', 3]);
    expect(due(NOON + DAY_MS)).toEqual(['key.expiring', 1]);
    expect(due(NOON + 1)).toEqual(['key.expiring', 1]);
  });

  it('is key.expired from its expiry on, for 7 days, without days', () => {
    expect(due(NOON)).toEqual(['key.expired', undefined]);
    expect(due(NOON - 7 * DAY_MS)).toEqual(['key.expired', undefined]);
    expect(due(NOON - 7 * DAY_MS - 1)).toBeUndefined();
  });

  it('is none for a key without an expiry, a revoked key, or an expiry that is no date', () => {
    expect(due(undefined)).toBeUndefined();
    expect(due(NOON + DAY_MS, { revokedAt: new Date(NOON).toISOString() })).toBeUndefined();
    expect(expiryNotice({ ...key(undefined), expiresAt: 'soon' }, NOON)).toBeUndefined();
  });

  it('is one notice per threshold and expiry: the 7-day and 1-day notices, and a new expiry’s, each sent once', () => {
    const marker = (expiresAt: number, now = NOON) => expiryNotice(key(expiresAt), now)?.marker;
    const expiry = NOON + 5 * DAY_MS;
    // The same notice, asked again a day later: the same marker, so replicas and rounds send it once.
    expect(marker(expiry)).toBe(marker(expiry, NOON + DAY_MS));
    const markers = new Set([
      marker(expiry),
      marker(expiry, expiry - DAY_MS),
      marker(expiry, expiry),
      marker(expiry + 1),
      marker(expiry + 1, expiry + 1 - DAY_MS),
    ]);
    expect(markers.size).toBe(5);
  });

  it('remembers a notice at least until the key’s key.expired can no longer be sent', () => {
    for (const expiresAt of [NOON + 5 * DAY_MS, NOON + DAY_MS / 2, NOON, NOON - 3 * DAY_MS]) {
      const notice = expiryNotice(key(expiresAt), NOON);
      expect(NOON + (notice?.markerTtlMs ?? 0)).toBeGreaterThan(expiresAt + 7 * DAY_MS);
    }
  });
});
