import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LIMIT_SCRIPT_PARTS } from '../../../src/limits/engines/limit-script.js';
import { PENDING_BUCKET_MS } from '../../../src/limits/key-limiter.js';
import { useRedisClient } from '../../support/helpers.js';

/*
 * Each part of the limit script on its own: a script made of the part's definitions (after those
 * whose functions it calls) and a few lines that call it with inputs written here, returning what
 * it hands back (cjson) or the reply itself. The whole script's behaviour is the limiter contract's
 * (redis-key-limiter.test.ts, which also holds that Redis runs the parts as composed); these pin
 * each part's inputs and outputs.
 */

const { DEADLINE, READ_WINDOWS, CREDITS_READ, BAN_LEFT, DECIDE, TAKE, BAN, HISTORY, CREDITS_WRITE, REPLY } =
  LIMIT_SCRIPT_PARTS;

const redisOf = useRedisClient();
let client: Redis;
/** This test's keys: each test has a prefix of its own, its keys deleted when it ends. */
let p: string;
beforeAll(() => {
  client = redisOf();
});
beforeEach(() => {
  p = `t${randomUUID().slice(0, 8)}:`;
});
afterEach(async () => {
  const keys = await client.keys(`${p}*`);
  if (keys.length > 0) await client.del(...keys);
});

/** A fixed `now` (epoch ms, a whole number of pending steps and of seconds), far from the real clock. */
const NOW = 1_000_000_000_000;
const step = (ms: number) => Math.floor(ms / PENDING_BUCKET_MS);

/** A JS value as a Lua expression: arrays as sequences (undefined: a hole), objects as records. */
function lua(value: unknown): string {
  if (value === undefined || value === null) return 'nil';
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  // JSON's escapes of an ASCII string are Lua's.
  if (typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return `{${value.map((v, i) => `[${i + 1}] = ${lua(v)}`).join(', ')}}`;
  const fields = Object.entries(value as Record<string, unknown>).map(
    ([k, v]) => `${/^\d+$/.test(k) ? `[${k}]` : k} = ${lua(v)}`,
  );
  return `{${fields.join(', ')}}`;
}

/** Runs the parts' definitions and then `body`, on KEYS `keys` and ARGV `args`. */
function run(parts: string[], body: string, keys: string[] = [], args: Array<string | number> = []) {
  return client.eval(`${parts.join('')}\n${body}`, keys.length, ...keys, ...args);
}

/** As run, for a body that returns cjson.encode(...): what it encoded. */
async function runJson(parts: string[], body: string, keys: string[] = [], args: Array<string | number> = []) {
  return JSON.parse(String(await run(parts, body, keys, args)));
}

interface WindowSpec {
  kind: 'f' | 'c' | 'h' | 's';
  limit: number;
  used: number;
  a: number;
  b?: number;
  cur?: number;
  from?: number;
  low?: number;
  live?: string[];
  key?: string;
}

/** The `windows` readWindows hands on, as a Lua expression (keys: `${p}w<w>` unless given). */
function windowsLua(specs: WindowSpec[]): string {
  const field = <K extends keyof WindowSpec>(name: K) => lua(specs.map((s) => s[name]));
  const keys = specs.map((s, w) => s.key ?? `${p}w${w + 1}`);
  return `{n = ${specs.length}, keys = ${lua(keys)}, kind = ${field('kind')}, limit = ${field('limit')}, a = ${field('a')},
    b = ${field('b')}, used = ${field('used')}, cur = ${field('cur')}, from = ${field('from')}, low = ${field('low')},
    live = ${field('live')}, ttl = {}}`;
}

describe('DEADLINE: deadlinePassed(deadline) -> redisNow, late', () => {
  const call = (deadline: number) =>
    run([DEADLINE], `local now, late = deadlinePassed(${deadline}) return {now, tostring(late)}`) as Promise<
      [number, string]
    >;

  it("answers Redis's time in ms, and late only past a deadline that is set", async () => {
    const [before] = await client.time();
    const [none, noneLate] = await call(0);
    const [after] = await client.time();
    expect(none).toBeGreaterThanOrEqual(Number(before) * 1000);
    expect(none).toBeLessThan((Number(after) + 1) * 1000);
    expect(noneLate).toBe('false');
    expect((await call(1))[1]).toBe('true');
    expect((await call(none + 3_600_000))[1]).toBe('false');
  });
});

describe('READ_WINDOWS: readWindows(keys, args, nw, now) -> windows, banHeld', () => {
  /** ARGV as the limiter sends it, up to the windows (what readWindows reads of it). */
  const args = (windows: Array<[string, number, number, number]>) => [
    windows.length,
    NOW,
    -1,
    0,
    0,
    0,
    0,
    '',
    0,
    ...windows.flat(),
  ];
  const read = (keys: string[], windows: Array<[string, number, number, number]>) =>
    runJson(
      [READ_WINDOWS],
      `local windows, banHeld = readWindows(KEYS, ARGV, tonumber(ARGV[1]), tonumber(ARGV[2]))
      return cjson.encode({windows = windows, banHeld = banHeld})`,
      keys,
      args(windows),
    );

  it('reads every kind: f and c counters in one MGET with the ban, h the field d, s its live buckets', async () => {
    const bucket = 1_000;
    const cur = NOW / bucket;
    await client.set(`${p}f`, '3');
    await client.set(`${p}c`, '2');
    await client.hset(`${p}h`, 'd', '5', '13a', '9');
    await client.hset(`${p}s`, String(cur - 3), '1', String(cur - 1), '4', String(cur - 5), '2');
    await client.set(`${p}ban`, String(NOW + 4_000));
    const keys = [`${p}f`, `${p}c`, `${p}h`, `${p}s`, `${p}ban`];
    const { windows, banHeld } = await read(keys, [
      ['f', 10, 60_000, 0],
      ['c', 11, NOW + 5_000, 0],
      ['h', 12, NOW + 6_000, 0],
      ['s', 13, bucket, 3],
    ]);
    expect(banHeld).toBe(String(NOW + 4_000));
    expect(windows).toMatchObject({
      n: 4,
      keys,
      kind: ['f', 'c', 'h', 's'],
      limit: [10, 11, 12, 13],
      a: [60_000, NOW + 5_000, NOW + 6_000, bucket],
      used: [3, 2, 5, 5],
      ttl: {},
    });
    // Only a sliding window has b (parsed where read), its bucket now, the oldest it sees and holds.
    expect(windows.b).toEqual([null, null, null, 3]);
    expect(windows.cur).toEqual([null, null, null, cur]);
    expect(windows.from).toEqual([null, null, null, cur - 3]);
    expect(windows.low).toEqual([null, null, null, cur - 3]);
    // The hash as read, the stale bucket with it; Redis no longer holds that one.
    expect(windows.live[3]).toHaveLength(6);
    expect(await client.hgetall(`${p}s`)).toEqual({ [cur - 3]: '1', [cur - 1]: '4' });
  });

  it('reads nothing as 0: no counters, no buckets (low nil), no ban (false)', async () => {
    const keys = [`${p}f`, `${p}h`, `${p}s`, `${p}ban`];
    const { windows, banHeld } = await read(keys, [
      ['f', 1, 60_000, 0],
      ['h', 1, NOW + 1, 0],
      ['s', 1, 1_000, 60],
    ]);
    expect(banHeld).toBe(false);
    expect(windows.used).toEqual([0, 0, 0]);
    expect(windows.low).toEqual({});
  });

  it('drops every bucket of a sliding window older than it sees, and counts none of them', async () => {
    const cur = NOW / 100;
    await client.hset(`${p}s`, String(cur - 11), '7', String(cur - 40), '1');
    const { windows } = await read([`${p}s`, `${p}ban`], [['s', 5, 100, 10]]);
    expect(windows.used).toEqual([0]);
    expect(await client.exists(`${p}s`)).toBe(0);
  });

  describe('resetOf(windows, w, now)', () => {
    const reset = (specs: WindowSpec[], w: number) =>
      runJson(
        [READ_WINDOWS],
        `local windows = ${windowsLua(specs)}
        local first = resetOf(windows, ${w}, ${NOW})
        return cjson.encode({first = first, again = resetOf(windows, ${w}, ${NOW}), ttl = windows.ttl})`,
      );

    it('a calendar or day window: until its end', async () => {
      expect((await reset([{ kind: 'c', limit: 1, used: 1, a: NOW + 7_000 }], 1)).first).toBe(7_000);
      expect((await reset([{ kind: 'h', limit: 1, used: 0, a: NOW + 8_000 }], 1)).first).toBe(8_000);
    });

    it('a sliding window: until its oldest bucket leaves it, the bucket now when it holds none', async () => {
      const sliding = { kind: 's', limit: 1, used: 1, a: 1_000, b: 3, cur: NOW / 1_000 } as const;
      expect((await reset([{ ...sliding, low: NOW / 1_000 - 2 }], 1)).first).toBe(2_000);
      expect((await reset([sliding], 1)).first).toBe(4_000);
    });

    it('a fixed window: its length while empty or its key has no expiry, else its PTTL, read once', async () => {
      const fixed = { kind: 'f', limit: 1, a: 60_000, key: `${p}f` } as const;
      expect(await reset([{ ...fixed, used: 0 }], 1)).toEqual({ first: 60_000, again: 60_000, ttl: {} });
      await client.set(`${p}f`, '1');
      expect((await reset([{ ...fixed, used: 1 }], 1)).first).toBe(60_000);
      await client.set(`${p}f`, '1', 'PX', 30_000);
      const { first, again, ttl } = await reset([{ ...fixed, used: 1 }], 1);
      expect(first).toBeGreaterThan(0);
      expect(first).toBeLessThanOrEqual(30_000);
      expect(again).toBe(first);
      expect(ttl).toEqual([first]);
    });
  });
});

describe('BAN_LEFT: banLeft(value, key, now)', () => {
  const left = (value: string) => run([BAN_LEFT], `return banLeft(${lua(value)}, KEYS[1], ${NOW})`, [`${p}ban`]);

  it('the end the key holds, less now; PTTL for an old value or an end already past', async () => {
    await client.set(`${p}ban`, '1', 'PX', 9_000);
    expect(await left(String(NOW + 4_000))).toBe(4_000);
    for (const value of ['1', String(NOW - 1)]) {
      const ms = Number(await left(value));
      expect(ms).toBeGreaterThan(0);
      expect(ms).toBeLessThanOrEqual(9_000);
    }
  });
});

describe('DECIDE: decide(windows, costs, banState, credits, now) -> decision', () => {
  /** A window of 'c' ends 5 s after NOW: a refusal's wait is 5 s. */
  const cal = (limit: number, used: number): WindowSpec => ({ kind: 'c', limit, used, a: NOW + 5_000 });
  const banState = (over: Record<string, string | false> = {}) => ({
    key: `${p}ban`,
    pending: `${p}pending`,
    held: false,
    threshold: '2',
    window: '60000',
    ms: '30000',
    grace: '0',
    shortest: '0',
    ...over,
  });
  const decide = (specs: WindowSpec[], costs: number[], ban = banState(), credits?: Record<string, unknown>) =>
    runJson(
      [READ_WINDOWS, CREDITS_READ, BAN_LEFT, DECIDE],
      `local credits = ${lua(credits)}
      local d = decide(${windowsLua(specs)}, ${lua(costs)}, ${lua(ban)}, credits, ${NOW})
      local added = nil
      if d.added then
        added = {}
        for ends, count in pairs(d.added) do added[string.format('%d', ends)] = count end
      end
      return cjson.encode({out = table.concat(d.out), taken = d.taken, refused = d.refused, banTtl = d.banTtl,
        startedAt = d.startedAt, pending = d.pending, last = d.last, added = added, credits = credits})`,
    );

  it('admits a request that fits every window exactly, and refuses the next', async () => {
    expect(await decide([cal(3, 2), cal(5, 1)], [1, 1])).toMatchObject({
      out: 'AL',
      taken: 1,
      refused: true,
      banTtl: 0,
      startedAt: 0,
    });
  });

  it('a request of cost 0: admitted on a window past its limit (one lowered), taking nothing, counting toward no ban', async () => {
    const decision = await decide([cal(1, 3)], [0, 0], banState({ threshold: '0' }));
    expect(decision).toMatchObject({ out: 'AA', taken: 0, refused: false, startedAt: 0 });
    expect(decision.pending).toBeUndefined();
  });

  it('a refused request takes nothing: a cheaper one after it is admitted', async () => {
    expect(await decide([cal(3, 1)], [3, 1, 2])).toMatchObject({ out: 'LAL', taken: 1, refused: true });
  });

  it('counts a refusal until its wait ends, with the pending ones still live; the one past the threshold bans', async () => {
    const ends = step(NOW + 5_000);
    // One pending refusal still counting, five whose step has passed (dropped, not counted).
    await client.hset(`${p}pending`, String(ends + 7), '1', String(step(NOW)), '5');
    const decision = await decide([cal(1, 1)], [1, 1, 1, 0]);
    expect(decision).toMatchObject({ out: 'LBBB', startedAt: 2, pending: 3, last: ends + 7 });
    expect(decision.added).toEqual({ [ends]: 2 });
    expect(await client.hgetall(`${p}pending`)).toEqual({ [ends + 7]: '1' });
  });

  it('the wait counted: the refusing windows’ longest, at least the shortest, capped, less the grace', async () => {
    const waits = async (ban: Record<string, string>) =>
      Object.keys((await decide([cal(1, 1), { ...cal(1, 1), a: NOW + 9_000 }, cal(9, 0)], [1], banState(ban))).added);
    expect(await waits({})).toEqual([String(step(NOW + 9_000))]);
    expect(await waits({ shortest: '20000' })).toEqual([String(step(NOW + 20_000))]);
    expect(await waits({ window: '3000' })).toEqual([String(step(NOW + 3_000))]);
    expect(await waits({ grace: '1000' })).toEqual([String(step(NOW + 8_000))]);
  });

  it('reads no pending refusals for a refusal that counts none (no threshold, or a wait within the grace)', async () => {
    await client.hset(`${p}pending`, String(step(NOW)), '5');
    for (const ban of [banState({ threshold: '-1' }), banState({ grace: '5000' })]) {
      const decision = await decide([cal(1, 1)], [1, 1, 1], ban);
      expect(decision).toMatchObject({ out: 'LLL', refused: true, startedAt: 0 });
      expect(decision.pending).toBeUndefined();
      expect(decision.added).toBeUndefined();
    }
    expect(await client.hgetall(`${p}pending`)).toEqual({ [step(NOW)]: '5' });
  });

  it('a key already banned: every request banned, cost 0 too, with the ban’s ms left', async () => {
    const decision = await decide([cal(9, 0)], [1, 0], banState({ held: String(NOW + 4_000) }));
    expect(decision).toMatchObject({ out: 'BB', taken: 0, banTtl: 4_000, startedAt: 0, refused: false });
  });

  describe('with credits', () => {
    const credits = (b: number, x = false) => ({ b, x, x0: x, dirty: false, u: 0, h: 0, r: '', m: 0, refilled: 0 });

    it('a request the windows admit but the balance cannot cover: C, taking nothing; a cheaper one after it fits', async () => {
      const decision = await decide([cal(9, 0)], [1, 2, 1], banState({ threshold: '0' }), credits(2));
      expect(decision).toMatchObject({ out: 'ACA', taken: 2, refused: false, startedAt: 0 });
      // Marked exhausted by that refusal: the balance left then and its cost.
      expect(decision.credits).toMatchObject({ x: true, dirty: true, ex: [1, 2] });
      expect(decision.pending).toBeUndefined();
    });

    it('a refusal after the batch took the balance to 0 marks it as a spend to 0; a marked one not again', async () => {
      expect((await decide([cal(9, 0)], [1, 1], banState(), credits(1))).credits.ex).toEqual([0, 0]);
      const marked = await decide([cal(9, 0)], [1, 0], banState(), credits(0, true));
      expect(marked.out).toBe('CA');
      expect(marked.credits.ex).toBeUndefined();
      expect(marked.credits.dirty).toBe(false);
    });
  });
});

describe('TAKE: take(windows, taken) -> fresh', () => {
  const take = (specs: WindowSpec[], taken: number) =>
    runJson(
      [TAKE],
      `local windows = ${windowsLua(specs)}
      local fresh = take(windows, ${taken})
      return cjson.encode({fresh = fresh, ttl = windows.ttl, low = windows.low})`,
    );

  it('a new counter gets its expiry: a fixed window its length, a calendar one its end', async () => {
    const end = Date.now() + 3_600_000;
    const { fresh, ttl } = await take(
      [
        { kind: 'f', limit: 9, used: 0, a: 60_000 },
        { kind: 'c', limit: 9, used: 0, a: end },
      ],
      2,
    );
    expect(fresh).toBeUndefined();
    expect(ttl).toEqual([60_000, end]);
    expect(await client.get(`${p}w1`)).toBe('2');
    const pttl = await client.pttl(`${p}w1`);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(60_000);
    expect(await client.pexpiretime(`${p}w2`)).toBe(end);
  });

  it('an existing counter keeps its expiry', async () => {
    await client.set(`${p}w1`, '3', 'PX', 600_000);
    const { ttl } = await take([{ kind: 'f', limit: 9, used: 3, a: 60_000 }], 2);
    expect(ttl).toEqual({});
    expect(await client.get(`${p}w1`)).toBe('5');
    expect(await client.pttl(`${p}w1`)).toBeGreaterThan(60_000);
  });

  it('a day window: the field d, the hash fresh when the field is new, its expiry left to the history', async () => {
    const day = { kind: 'h', limit: 9, used: 0, a: NOW + 1, key: `${p}day` } as const;
    expect((await take([day], 2)).fresh).toEqual({ [`${p}day`]: true });
    expect(await client.pttl(`${p}day`)).toBe(-1);
    expect((await take([{ ...day, used: 2 }], 1)).fresh).toBeUndefined();
    expect(await client.hget(`${p}day`, 'd')).toBe('3');
  });

  it('a sliding window: the bucket now, the hash living the window and a bucket, low set', async () => {
    const cur = NOW / 1_000;
    const { low } = await take([{ kind: 's', limit: 9, used: 0, a: 1_000, b: 3, cur, from: cur - 3 }], 2);
    expect(low).toEqual([cur]);
    expect(await client.hgetall(`${p}w1`)).toEqual({ [cur]: '2' });
    const pttl = await client.pttl(`${p}w1`);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(4_000);
  });

  it('takes nothing when nothing was admitted', async () => {
    expect(await take([{ kind: 'f', limit: 9, used: 0, a: 60_000 }], 0)).toEqual({ ttl: {}, low: {} });
    expect(await client.exists(`${p}w1`)).toBe(0);
  });
});

describe('BAN: ban(decision, banState, now) -> banTtl', () => {
  const ban = (decision: string, now = NOW) =>
    run([BAN], `return ban(${decision}, {key = KEYS[1], pending = KEYS[2], ms = '30000'}, ${now})`, [
      `${p}ban`,
      `${p}pending`,
    ]);

  it('a ban started: its end written, living its length, the pending refusals cleared', async () => {
    await client.hset(`${p}pending`, '1', '1');
    expect(await ban(`{startedAt = 2, banTtl = 0, last = 0}`)).toBe(30_000);
    expect(await client.get(`${p}ban`)).toBe(String(NOW + 30_000));
    const pttl = await client.pttl(`${p}ban`);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(30_000);
    expect(await client.exists(`${p}pending`)).toBe(0);
  });

  it('refusals counted: each step’s added to the hash, which lives until its last step', async () => {
    const now = Date.now();
    const [a, b, held] = [step(now + 4_000), step(now + 9_000), step(now + 6_000)];
    await client.hset(`${p}pending`, String(a), '1', String(held), '2');
    const added = lua({ [a]: 2, [b]: 1 });
    expect(await ban(`{startedAt = 0, banTtl = 0, pending = 3, last = ${held}, added = ${added}}`, now)).toBe(0);
    expect(await client.hgetall(`${p}pending`)).toEqual({ [a]: '3', [b]: '1', [held]: '2' });
    const pttl = await client.pttl(`${p}pending`);
    expect(pttl).toBeGreaterThan(6_000);
    expect(pttl).toBeLessThanOrEqual(b * PENDING_BUCKET_MS - now);
  });

  it('neither: writes nothing, the ban in force keeps its ms left', async () => {
    expect(await ban(`{startedAt = 0, banTtl = 1234, last = 0}`)).toBe(1_234);
    expect(await client.exists(`${p}ban`, `${p}pending`)).toBe(0);
  });
});

describe('HISTORY: history(decision, costs, fresh, hour, expireAt, keyHash, customerHash)', () => {
  const EXPIRE_AT = Date.now() + 10 * 86_400_000;
  const history = (
    out: string,
    costs: number[],
    taken: number,
    options: { fresh?: boolean; customer?: boolean; hour?: string } = {},
  ) =>
    run(
      [HISTORY],
      `local out = {}
      for i = 1, #ARGV[1] do out[i] = string.sub(ARGV[1], i, i) end
      local fresh = nil
      if ${options.fresh ?? false} then fresh = {[KEYS[1]] = true} end
      return history({out = out, taken = ${taken}}, ${lua(costs)}, fresh, ARGV[2], ARGV[3], KEYS[1], KEYS[2])`,
      options.customer === false ? [`${p}key`] : [`${p}key`, `${p}customer`],
      [out, options.hour ?? '13', EXPIRE_AT],
    );

  it('counts each outcome by its letter, cost 0 as forbidden, and the units, in both hashes', async () => {
    await history('ALBCA', [2, 1, 1, 3, 0], 2);
    for (const hash of [`${p}key`, `${p}customer`]) {
      expect(await client.hgetall(hash)).toEqual({
        '13a': '1',
        '13l': '1',
        '13b': '1',
        '13c': '1',
        '13f': '1',
        '13u': '2',
      });
      expect(await client.pexpiretime(hash)).toBe(EXPIRE_AT);
    }
  });

  it('only the key’s hash for a key without a customer; no units field when nothing was admitted', async () => {
    await history('LL', [1, 1], 0, { customer: false });
    expect(await client.hgetall(`${p}key`)).toEqual({ '13l': '2' });
    expect(await client.exists(`${p}customer`)).toBe(0);
  });

  it('sets the expiry only when it gives a hash a new field, or take did (fresh)', async () => {
    await client.hset(`${p}key`, '13a', '4', '13u', '4');
    await client.pexpireat(`${p}key`, EXPIRE_AT - 1_000);
    await history('A', [1], 1, { customer: false });
    expect(await client.hgetall(`${p}key`)).toEqual({ '13a': '5', '13u': '5' });
    expect(await client.pexpiretime(`${p}key`)).toBe(EXPIRE_AT - 1_000);
    await history('A', [1], 1, { customer: false, fresh: true });
    expect(await client.pexpiretime(`${p}key`)).toBe(EXPIRE_AT);
    await client.pexpireat(`${p}key`, EXPIRE_AT - 1_000);
    await history('L', [1], 0, { customer: false });
    expect(await client.pexpiretime(`${p}key`)).toBe(EXPIRE_AT);
  });

  it("keeps nothing with the hour ''", async () => {
    await history('A', [1], 1, { hour: '' });
    expect(await client.exists(`${p}key`, `${p}customer`)).toBe(0);
  });
});

describe('CREDITS_READ and CREDITS_WRITE: readCredits(...) -> credits, creditsWrite(credits, taken, hash)', () => {
  const hour = Math.floor(NOW / 3_600_000);
  const spend = (taken: number, amount = 0, period = '') =>
    runJson(
      [CREDITS_READ, CREDITS_WRITE],
      `local credits = readCredits(KEYS[1], KEYS[2], ${NOW}, ${amount}, ${lua(period)})
      creditsWrite(credits, ${taken}, KEYS[1])
      return cjson.encode(credits)`,
      [`${p}credits`, `${p}ledger`],
    );

  it('spends the admitted units into the open hour, keeping the balance before', async () => {
    await client.hset(`${p}credits`, 'b', '5', 'h', String(hour), 'u', '1', 'r', '');
    expect(await spend(2)).toMatchObject({ before: 5, b: 3, u: 3, refilled: 0, x: false });
    expect(await client.hgetall(`${p}credits`)).toEqual({ b: '3', h: String(hour), u: '3', r: '' });
  });

  it('a spend to 0 marks the balance exhausted, in the same write', async () => {
    await client.hset(`${p}credits`, 'b', '2', 'h', String(hour), 'u', '0', 'r', '');
    expect(await spend(2)).toMatchObject({ before: 2, b: 0, ex: [0, 0], x: true });
    expect(await client.hget(`${p}credits`, 'x')).toBe('1');
  });

  it('writes nothing when nothing was spent and nothing read changed the balance', async () => {
    await client.hset(`${p}credits`, 'b', '2', 'h', String(hour));
    await spend(0);
    expect(await client.hgetall(`${p}credits`)).toEqual({ b: '2', h: String(hour) });
  });

  it('a refill due is applied on reading: the balance before the batch is after it', async () => {
    await client.hset(`${p}credits`, 'b', '3', 'h', String(hour), 'u', '0', 'r', '');
    expect(await spend(1, 10, `period:${NOW}`)).toMatchObject({ before: 10, b: 9, refilled: 7 });
    expect(await client.xlen(`${p}ledger`)).toBe(1);
  });
});

describe('REPLY: reply(windows, decision, banTtl, credits, now, redisNow)', () => {
  const cur = NOW / 1_000;
  const specs: WindowSpec[] = [
    { kind: 'f', limit: 5, used: 0, a: 60_000 },
    {
      kind: 's',
      limit: 9,
      used: 5,
      a: 1_000,
      b: 3,
      cur,
      from: cur - 3,
      low: cur - 3,
      live: [String(cur - 1), '4', String(cur - 3), '1', String(cur - 5), '2'],
    },
  ];
  const reply = (decision: string, banTtl: number, credits?: Record<string, unknown>) =>
    run(
      [READ_WINDOWS, REPLY],
      `return reply(${windowsLua(specs)}, ${decision}, ${banTtl}, ${lua(credits)}, ${NOW}, 42)`,
    ) as Promise<Array<string | number>>;

  it('outcomes, ban ms, its start, then per window used, reset and (a refusal in the batch) live buckets, then Redis’s time', async () => {
    expect(await reply(`{out = {'A', 'L'}, taken = 1, refused = true, startedAt = 0}`, 0)).toEqual([
      'AL',
      0,
      0,
      0,
      5,
      60_000,
      1_000,
      '',
      `${cur - 3}:1,${cur - 1}:4,${cur}:1`,
      42,
    ]);
    expect(await reply(`{out = {'B'}, taken = 0, refused = false, startedAt = 1}`, 30_000)).toEqual([
      'B',
      30_000,
      1,
      0,
      5,
      60_000,
      1_000,
      '',
      '',
      42,
    ]);
  });

  it('with credits: before, after, refilled, the exhaustion announced (-1 and 0: none), m', async () => {
    const decision = `{out = {'A'}, taken = 1, refused = false, startedAt = 0}`;
    const credits = { before: 5, b: 4, refilled: 2, m: 7 };
    expect((await reply(decision, 0, credits)).slice(-7)).toEqual([5, 4, 2, -1, 0, 7, 42]);
    expect((await reply(decision, 0, { ...credits, ex: [0, 0] })).slice(-7)).toEqual([5, 4, 2, 0, 0, 7, 42]);
  });
});
