import { describe, expect, it } from 'vitest';
import { hoursOfKeys, series, sumOf, toCsv, topKeys, withRefused } from '../../src/usage/reports.js';
import { DAY_MS, emptyCounts, HOUR_MS, type HourUsage, type UsageCounts } from '../../src/usage/usage-history.js';

/**
 * What the admin API builds from the history's hours (usage/reports.ts), without a gateway: the
 * series an invoice is computed from, its CSV, the busiest keys and the totals per plan. The
 * routes that serve them: usage-history.test.ts.
 */

const D0 = Date.UTC(2026, 10, 30);
const hour = (at: number, given: Partial<UsageCounts> = {}): HourUsage => ({ hour: at, ...emptyCounts(), ...given });
const refusedToo = (given: Partial<UsageCounts>) => withRefused({ ...emptyCounts(), ...given });

describe('a series of steps', () => {
  it('sums each hour into the step of `from` it falls in, every step listed, empty ones as zeros', () => {
    // Days counted from 06:00, as a day series from an unaligned `from` would be.
    const from = D0 + 6 * HOUR_MS;
    const hours = [
      hour(from, { admitted: 1, units: 2 }),
      hour(from + 23 * HOUR_MS, { limited: 3, banned: 1 }),
      hour(from + DAY_MS, { forbidden: 4, upstreamFailed: 5 }),
    ];
    expect(series(hours, from, from + 3 * DAY_MS, DAY_MS)).toEqual([
      { start: from, ...refusedToo({ admitted: 1, units: 2, limited: 3, banned: 1 }) },
      { start: from + DAY_MS, ...refusedToo({ forbidden: 4, upstreamFailed: 5 }) },
      { start: from + 2 * DAY_MS, ...refusedToo({}) },
    ]);
    expect(series([], from, from + 2 * HOUR_MS, HOUR_MS).map((s) => s.start)).toEqual([from, from + HOUR_MS]);
  });

  it('names refused the limited and the banned together, and sums many hours', () => {
    expect(withRefused({ ...emptyCounts(), limited: 2, banned: 3 }).refused).toBe(5);
    expect(sumOf([hour(D0, { admitted: 1, units: 4 }), hour(D0 + HOUR_MS, { admitted: 2, forbidden: 1 })])).toEqual({
      ...emptyCounts(),
      admitted: 3,
      units: 4,
      forbidden: 1,
    });
  });

  it('is written as CSV with a header, one line per step and a final newline', () => {
    const rows = [
      {
        start: '2026-11-30T00:00:00.000Z',
        end: '2026-12-01T00:00:00.000Z',
        ...refusedToo({ admitted: 1, limited: 2, banned: 3, forbidden: 4 }),
      },
      {
        start: '2026-12-01T00:00:00.000Z',
        end: '2026-12-02T00:00:00.000Z',
        ...refusedToo({ units: 5, upstreamFailed: 6 }),
      },
    ];
    expect(toCsv(rows)).toBe(
      'start,end,admitted,limited,banned,refused,forbidden,units,upstreamFailed,outOfCredits\n' +
        '2026-11-30T00:00:00.000Z,2026-12-01T00:00:00.000Z,1,2,3,5,4,0,0,0\n' +
        '2026-12-01T00:00:00.000Z,2026-12-02T00:00:00.000Z,0,0,0,0,0,5,6,0\n',
    );
  });
});

describe('reading many keys’ hours', () => {
  it('reads every key once, at most 200 at a time, and answers in the order asked', async () => {
    const ids = Array.from({ length: 450 }, (_, i) => `key_${i}`);
    let reading = 0;
    let most = 0;
    const asked: string[] = [];
    const read = async (id: string) => {
      asked.push(id);
      reading++;
      most = Math.max(most, reading);
      await new Promise((resolve) => setImmediate(resolve));
      reading--;
      return [hour(D0, { admitted: Number(id.slice(4)) })];
    };
    const out = await hoursOfKeys(read, ids);
    expect(most).toBe(200);
    expect(asked).toEqual(ids);
    expect(out.map(([id, hours]) => [id, hours[0]?.admitted])).toEqual(ids.map((id, i) => [id, i]));
  });
});

describe('the busiest keys of a window', () => {
  const records = new Map([
    ['key_a', { name: 'alpha', plan: 'pro' }],
    ['key_b', { name: 'beta', plan: 'free', revokedAt: '2026-11-30T10:00:00.000Z' }],
    ['key_c', { name: 'gamma', plan: 'free' }],
    ['key_d', { name: 'delta', plan: 'basic' }],
  ]);

  it('sorts by the asked count, then by admitted, then by id; plans by admitted and refused, then by name', () => {
    const top = topKeys(
      [
        ['key_c', [hour(D0, { admitted: 2, limited: 1 })]],
        ['key_a', [hour(D0, { admitted: 1, limited: 1 }), hour(D0 + HOUR_MS, { banned: 1 })]],
        ['key_b', [hour(D0, { admitted: 2, limited: 2 })]],
        ['key_d', [hour(D0, { admitted: 2, limited: 1, units: 7 })]],
        // Nothing in the window: not listed, not counted.
        ['key_e', []],
      ],
      records,
      'refused',
    );
    // refused 2, 2, 1, 1: key_b before key_a by admitted; key_c before key_d by id.
    expect(top.keys.map((k) => [k.id, k.refused, k.admitted])).toEqual([
      ['key_b', 2, 2],
      ['key_a', 2, 1],
      ['key_c', 1, 2],
      ['key_d', 1, 2],
    ]);
    expect(top.keys[0]).toEqual({
      id: 'key_b',
      name: 'beta',
      plan: 'free',
      revoked: true,
      ...refusedToo({ admitted: 2, limited: 2 }),
    });
    expect(top.keys[1]).toMatchObject({ name: 'alpha', plan: 'pro', revoked: false, limited: 1, banned: 1 });
    // free 7 (two keys), then basic and pro at 3 each: by name.
    expect(top.plans.map((p) => [p.plan, p.keys, p.admitted + p.refused])).toEqual([
      ['free', 2, 7],
      ['basic', 1, 3],
      ['pro', 1, 3],
    ]);
    expect(top.plans[1]).toEqual({ plan: 'basic', keys: 1, ...refusedToo({ admitted: 2, limited: 1, units: 7 }) });
    expect(top.totals).toEqual({ keys: 4, ...refusedToo({ admitted: 7, limited: 5, banned: 1, units: 7 }) });
  });

  it('breaks ties by id, whatever order the keys come in', () => {
    const perKey: Array<[string, HourUsage[]]> = [
      ['key_d', [hour(D0, { admitted: 1 })]],
      ['key_a', [hour(D0, { admitted: 1 })]],
      ['key_c', [hour(D0, { admitted: 1 })]],
    ];
    expect(topKeys(perKey, records, 'admitted').keys.map((k) => k.id)).toEqual(['key_a', 'key_c', 'key_d']);
    expect(topKeys(perKey.reverse(), records, 'units').keys.map((k) => k.id)).toEqual(['key_a', 'key_c', 'key_d']);
  });

  it('ranks by units, forbidden or upstreamFailed when asked', () => {
    const perKey: Array<[string, HourUsage[]]> = [
      ['key_a', [hour(D0, { admitted: 9, units: 1, forbidden: 3 })]],
      ['key_c', [hour(D0, { admitted: 1, units: 5, upstreamFailed: 2 })]],
    ];
    expect(topKeys(perKey, records, 'units').keys.map((k) => k.id)).toEqual(['key_c', 'key_a']);
    expect(topKeys(perKey, records, 'forbidden').keys.map((k) => k.id)).toEqual(['key_a', 'key_c']);
    expect(topKeys(perKey, records, 'upstreamFailed').keys.map((k) => k.id)).toEqual(['key_c', 'key_a']);
  });
});
