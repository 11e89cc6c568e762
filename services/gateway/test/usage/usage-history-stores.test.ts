import { randomUUID } from 'node:crypto';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { RedisUsageHistory } from '../../src/usage/redis-usage-history.js';
import { DAY_MS, HOUR_MS, MemoryUsageHistory } from '../../src/usage/usage-history.js';
import { connected, redisClient } from '../support/helpers.js';
import { testClockFrom } from '../support/test-clock.js';
import { usageHistoryContract } from './usage-history.contract.js';

let redis: TestRedis | undefined;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

/** 10:20 UTC today: an hour and a day with room on both sides. */
const start = () => Math.floor(Date.now() / DAY_MS) * DAY_MS + 10 * HOUR_MS + 20 * 60_000;

usageHistoryContract('memory', async (retentionMs) => {
  let clock = start();
  return {
    history: new MemoryUsageHistory(retentionMs, () => clock),
    now: () => clock,
    advance: async (ms) => {
      clock += ms;
    },
    cleanup: async () => {},
  };
});

usageHistoryContract('redis', async (retentionMs) => {
  if (!redis) throw new Error('no Redis');
  const client = await connected(redisClient(redis.url, 2_000));
  const prefix = `uh${randomUUID().slice(0, 8)}:`;
  // The hours expire by Redis's real clock, which moves with the history's (test-clock.ts) only
  // from where they agree: a clock started at 10:20 UTC left every expiry off by the time to
  // 10:20, so the retention test failed from 23:20 to 10:20 UTC. It starts at the real now.
  const clock = testClockFrom(Date.now(), { client, prefix });
  const history = new RedisUsageHistory(client, prefix, retentionMs);
  return {
    history,
    now: clock.now,
    advance: (ms) => clock.advance(ms),
    cleanup: async () => {
      await history.flush();
      client.disconnect();
    },
  };
});

describe('the memory history’s hourly prune', () => {
  // The reader's clock stays at T0, so what is still readable is what the prunes kept.
  const t0 = start() - (start() % HOUR_MS);
  const kept = async (history: MemoryUsageHistory, key: string, at: number) =>
    (await history.hours(key, at, at + HOUR_MS)).length === 1;

  it('runs at most once an hour', async () => {
    const history = new MemoryUsageHistory(2 * HOUR_MS, () => t0);
    expect(history.kind).toBe('memory');
    history.count('early', 'admitted', 1, t0);
    // A prune 3 h less 1 ms on: T0's hour ended less than the retention before.
    history.count('later', 'admitted', 1, t0 + 3 * HOUR_MS - 1);
    expect(await kept(history, 'early', t0)).toBe(true);
    // Less than an hour after that prune: none, though T0's hour is now past the retention.
    history.count('later', 'admitted', 1, t0 + 4 * HOUR_MS - 2);
    expect(await kept(history, 'early', t0)).toBe(true);
    // An hour after it: T0's hour goes.
    history.count('later', 'admitted', 1, t0 + 4 * HOUR_MS - 1);
    expect(await kept(history, 'early', t0)).toBe(false);
  });

  it('drops the hours that ended the retention ago or more, and a key only with its last hour', async () => {
    const history = new MemoryUsageHistory(2 * HOUR_MS, () => t0);
    history.count('early', 'admitted', 1, t0);
    history.count('both', 'admitted', 1, t0);
    history.count('both', 'admitted', 1, t0 + HOUR_MS);
    history.count('mid', 'admitted', 1, t0 + HOUR_MS);
    // T0's hour ended exactly the retention before this: it goes; the next hour stays.
    history.count('last', 'admitted', 1, t0 + 3 * HOUR_MS);
    expect(await kept(history, 'early', t0)).toBe(false);
    expect(await kept(history, 'both', t0)).toBe(false);
    expect(await kept(history, 'both', t0 + HOUR_MS)).toBe(true);
    expect(await kept(history, 'mid', t0 + HOUR_MS)).toBe(true);
    expect((await history.activeKeys(t0, t0 + 1)).sort()).toEqual(['both', 'last', 'mid']);
  });

  it('reads an hour until the instant it ended the retention ago, whether or not a prune ran', async () => {
    let now = t0;
    const history = new MemoryUsageHistory(2 * HOUR_MS, () => now);
    history.count('k', 'admitted', 1, t0);
    now = t0 + 3 * HOUR_MS - 1;
    expect(await kept(history, 'k', t0)).toBe(true);
    now = t0 + 3 * HOUR_MS;
    expect(await kept(history, 'k', t0)).toBe(false);
  });
});

describe('the Redis history’s writes', () => {
  const harness = async () => {
    if (!redis) throw new Error('no Redis');
    const client = await connected(redisClient(redis.url, 2_000));
    const prefix = `uh${randomUUID().slice(0, 8)}:`;
    const errors: unknown[] = [];
    const history = new RedisUsageHistory(client, prefix, DAY_MS, (err) => errors.push(err));
    const day = Math.floor(start() / DAY_MS);
    return { client, prefix, errors, history, day, hash: (key: string) => client.hgetall(history.dayKey(key, day)) };
  };

  it('writes what `count` took within a second by itself, each count in its own field, none of zero', async () => {
    const { client, history, hash } = await harness();
    expect(history.kind).toBe('redis');
    history.count('key_timer', 'limited', 0, start());
    history.count('key_timer', 'admitted', 3, start());
    // No read, no flush: the batch's timer writes it.
    await vi.waitFor(async () => expect(await hash('key_timer')).toEqual({ '10l': '1', '10a': '1', '10u': '3' }), {
      timeout: 5_000,
      interval: 50,
    });
    client.disconnect();
  });

  it('writes 250 keys’ hours in 3 script calls, each hash whole with its expiry', async () => {
    const { client, history, hash, prefix, day } = await harness();
    const keys = Array.from({ length: 250 }, (_, i) => `key_many${i}`);
    for (const [i, key] of keys.entries()) {
      history.count(key, 'admitted', i + 1, start());
      history.served(key, 'GET /v1/pets', i + 1, start());
    }
    // EVAL counts too: a script Redis has not cached yet is sent whole.
    const calls = async () => {
      const stats = await client.info('commandstats');
      return ['evalsha', 'eval'].reduce(
        (n, c) => n + Number(new RegExp(`cmdstat_${c}:calls=(\\d+)`).exec(stats)?.[1] ?? 0),
        0,
      );
    };
    const before = await calls();
    await history.flush();
    // The counts' 250 hashes and the routes' 250, a hundred a call, each call after its clock
    // sample (one EVALSHA too): 3 + 3 writes and 6 samples. A call per hash was 500 and 500.
    expect((await calls()) - before).toBe(12);
    for (const [i, key] of keys.entries()) {
      expect(await hash(key)).toEqual({ '10a': '1', '10u': String(i + 1), '10|GET /v1/pets': String(i + 1) });
    }
    const ttl = await client.pttl(history.dayKey(keys[249] as string, day));
    expect(ttl).toBeGreaterThan(0);
    expect(prefix).not.toBe('');
    client.disconnect();
  });

  it('writes the other hashes of a call when one cannot take its counts, and says which failed', async () => {
    const { client, history, hash, errors, day } = await harness();
    // Something else under the second key's hash name: HINCRBY fails there (WRONGTYPE).
    await client.set(history.dayKey('key_b', day), 'not a hash', 'PX', 60_000);
    for (const key of ['key_a', 'key_b', 'key_c']) history.count(key, 'admitted', 2, start());
    await history.flush().catch((err: unknown) => errors.push(err));
    expect(String(errors[0])).toMatch(/WRONGTYPE/);
    expect(await hash('key_a')).toEqual({ '10a': '1', '10u': '2' });
    expect(await hash('key_c')).toEqual({ '10a': '1', '10u': '2' });
    // Its expiry is left as it was: the script sets none on a key it could not write.
    expect(await client.get(history.dayKey('key_b', day))).toBe('not a hash');
    expect(await client.pttl(history.dayKey('key_b', day))).toBeLessThanOrEqual(60_000);
    client.disconnect();
  });

  it('reads only the fields it writes: a field of another kind in a day’s hash is no hour', async () => {
    const { client, history, day } = await harness();
    await client.hset(history.dayKey('key_odd', day), { '10a': '2', '11z': '5', note: '7', xa: '1' });
    const from = day * DAY_MS;
    expect(await history.hours('key_odd', from, from + DAY_MS)).toEqual([
      {
        hour: from + 10 * HOUR_MS,
        admitted: 2,
        limited: 0,
        banned: 0,
        outOfCredits: 0,
        forbidden: 0,
        units: 0,
        upstreamFailed: 0,
      },
    ]);
    client.disconnect();
  });

  it('indexes a key again at its next decision when the day’s index could not be written, and says why', async () => {
    const { client, prefix, errors, history, day } = await harness();
    const index = `${prefix}usage:keys:${day}`;
    // Something else under the index's name: SADD fails inside the MULTI (WRONGTYPE).
    await client.set(index, 'not a set', 'PX', 60_000);
    history.count('key_retry', 'admitted', 1, start());
    await vi.waitFor(() => expect(errors).toHaveLength(1), { timeout: 5_000, interval: 20 });
    expect(String(errors[0])).toMatch(/WRONGTYPE/);
    await client.del(index);
    history.count('key_retry', 'admitted', 1, start() + 1);
    const from = day * DAY_MS;
    await vi.waitFor(async () => expect(await history.activeKeys(from, from + DAY_MS)).toEqual(['key_retry']), {
      timeout: 5_000,
      interval: 20,
    });
    expect(errors).toHaveLength(1);
    await history.flush();
    client.disconnect();
  });
});
