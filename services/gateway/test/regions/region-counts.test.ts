import { describe, expect, it } from 'vitest';
import { type LimitPolicy, policyFor } from '../../src/limits/policy.js';
import { RegionCounts } from '../../src/regions/region-counts.js';

const MINUTE_MS = 60_000;
const start = 1_000 * MINUTE_MS;

function table(region: string, clock: { at: number }, share: number | null = null): RegionCounts {
  const counts = new RegionCounts({ region, source: `${region}-1`, staleMs: 750, share }, () => clock.at);
  counts.connected = true;
  return counts;
}

const limitOf = (policy: LimitPolicy, w = 0) => policy.windows[w]?.limit;

describe('RegionCounts', () => {
  const policy = policyFor({ perMinute: 100 });

  it('lowers a window by what the other regions admitted in it; repeats and reorders do not inflate it', () => {
    const clock = { at: start + 1_000 };
    const eu = table('eu', clock);
    const us = table('us', clock);
    us.record('k1', undefined, policy, 30, clock.at);
    const first = us.snapshot();
    us.record('k1', undefined, policy, 10, clock.at);
    const second = us.snapshot();
    eu.receive(second);
    eu.receive(first);
    eu.receive(second);
    expect(limitOf(eu.adjust('k1', undefined, policy, clock.at))).toBe(60);
    // Another key, and its own region's other gateways (already in its Redis), change nothing.
    expect(eu.adjust('k2', undefined, policy, clock.at)).toBe(policy);
    eu.receive({
      region: 'eu',
      source: 'eu-2',
      entries: [['k:k1', 'minute', start / MINUTE_MS, 50, start + 2 * MINUTE_MS]],
    });
    expect(limitOf(eu.adjust('k1', undefined, policy, clock.at))).toBe(60);
  });

  it('sums the sources of every other region', () => {
    const clock = { at: start };
    const eu = table('eu', clock);
    const entry = (count: number): [string, string, number, number, number] => [
      'k:k1',
      'minute',
      start / MINUTE_MS,
      count,
      start + 2 * MINUTE_MS,
    ];
    eu.receive({ region: 'us', source: 'us-1', entries: [entry(10)] });
    eu.receive({ region: 'us', source: 'us-2', entries: [entry(15)] });
    eu.receive({ region: 'ap', source: 'ap-1', entries: [entry(5)] });
    expect(limitOf(eu.adjust('k1', undefined, policy, clock.at))).toBe(70);
  });

  it('weighs the previous aligned minute by the part of it a rolling window still covers, then forgets it', () => {
    const clock = { at: start + 30_000 };
    const eu = table('eu', clock);
    const us = table('us', clock);
    us.record('k1', undefined, policy, 40, clock.at);
    eu.receive(us.snapshot());
    // A quarter into the next minute: three quarters of the previous one's 40 still count.
    clock.at = start + MINUTE_MS + 15_000;
    // Heard meanwhile (a message with nothing new), so no share: the estimate alone.
    eu.receive({ region: 'us', source: 'us-1', entries: [] });
    expect(limitOf(eu.adjust('k1', undefined, policy, clock.at))).toBe(70);
    clock.at = start + 2 * MINUTE_MS;
    eu.receive({ region: 'us', source: 'us-1', entries: [] });
    eu.snapshot();
    expect(eu.adjust('k1', undefined, policy, clock.at)).toBe(policy);
  });

  it('enforces a share while a region goes unheard or NATS is away, and ends it when heard again', () => {
    const clock = { at: start };
    const eu = table('eu', clock);
    const us = table('us', clock);
    us.record('k1', undefined, policy, 20, clock.at);
    eu.receive(us.snapshot());
    expect(limitOf(eu.adjust('k1', undefined, policy, clock.at))).toBe(80);
    clock.at += 751;
    expect(eu.status()).toMatchObject({ partitioned: true, share: 0.5 });
    // Half of what was left (100 − 20 heard, none its own).
    expect(limitOf(eu.adjust('k1', undefined, policy, clock.at))).toBe(40);
    expect(eu.status().sharesInForce).toBe(1);
    eu.receive(us.snapshot());
    expect(eu.status()).toMatchObject({ partitioned: false, sharesInForce: 0 });
    expect(limitOf(eu.adjust('k1', undefined, policy, clock.at))).toBe(80);
    eu.connected = false;
    expect(limitOf(eu.adjust('k1', undefined, policy, clock.at))).toBe(40);
  });

  it('shares what was left when the partition began, so regions that had taken more are not given more', () => {
    // Three regions; us had taken half the window when the link went, eu and ap nothing.
    const clock = { at: start };
    const eu = table('eu', clock);
    const window = start / MINUTE_MS;
    eu.receive({ region: 'us', source: 'us-1', entries: [['k:k1', 'minute', window, 50, start + 2 * MINUTE_MS]] });
    eu.receive({ region: 'ap', source: 'ap-1', entries: [] });
    eu.connected = false;
    // A third of the 50 left: 16, so eu and ap together add at most 32 to us's 50. A third of the
    // whole window (33 each) would have let the three reach 116.
    expect(limitOf(eu.adjust('k1', undefined, policy, clock.at))).toBe(16);
    eu.record('k1', undefined, policy, 10, clock.at);
    expect(limitOf(eu.adjust('k1', undefined, policy, clock.at))).toBe(16);
  });

  it('takes REGION_SHARE for the share when set; a region that has heard no other enforces none', () => {
    const clock = { at: start };
    const alone = table('eu', clock, 0.2);
    alone.connected = false;
    expect(alone.adjust('k1', undefined, policy, clock.at)).toBe(policy);
    alone.receive({ region: 'us', source: 'us-1', entries: [] });
    alone.connected = false;
    expect(limitOf(alone.adjust('k1', undefined, policy, clock.at))).toBe(20);
  });
});
