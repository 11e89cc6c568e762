import { randomUUID } from 'node:crypto';
import { appendFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisUsageHistory } from '../../src/usage/redis-usage-history.js';
import { HOUR_MS } from '../../src/usage/usage-history.js';
import { FileSpoolStore, MemorySpoolStore, type SpoolStore, UsageSpool } from '../../src/usage/usage-spool.js';
import { connected, redisClient } from '../support/helpers.js';

/*
 * The usage spool (docs/limits-and-bans.md#when-redis-is-away): decisions the fallback took while
 * Redis was away, written into the real Redis history once, however often a segment is replayed.
 */

let redis: TestRedis;
let client: Redis;
let dir: string;
const quiet = { info: () => {}, warn: () => {} };

beforeAll(async () => {
  redis = await startRedis();
  client = (await connected(redisClient(redis.url))) as Redis;
  dir = mkdtempSync(join(tmpdir(), 'spool-'));
});
afterAll(async () => {
  client?.disconnect();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const history = () => new RedisUsageHistory(client, `sp${randomUUID().slice(0, 8)}:`, 63 * 24 * HOUR_MS);
const hourAgo = () => Date.now() - HOUR_MS;

describe.each([
  ['memory', () => new MemorySpoolStore()],
  ['files', () => new FileSpoolStore(join(dir, randomUUID()))],
] as Array<[string, () => SpoolStore]>)('UsageSpool (%s)', (_, store) => {
  it('writes each spooled decision into the history once, a segment replayed twice counting once', async () => {
    const h = history();
    const spooled = store();
    const spool = new UsageSpool({ store: spooled, replay: (s) => h.replay(s), log: quiet });
    const at = hourAgo();
    for (let i = 0; i < 5; i++) spool.count('key_a', 'admitted', 2, at);
    spool.count('key_a', 'limited', 0, at);
    spool.count('key_b', 'admitted', 1, at, 0, 'cus_x');
    spooled.seal();
    const [segment] = await spooled.sealed();
    // Written once, then again (a timed-out replay Redis applied, then retried).
    if (segment) await h.replay(segment);
    await spool.replay();
    await spool.replay();
    const [hour] = await h.hours('key_a', at - HOUR_MS, at + HOUR_MS);
    expect(hour).toMatchObject({ admitted: 5, limited: 1, units: 10 });
    expect((await h.hours('key_b', at - HOUR_MS, at + HOUR_MS, 'cus_x'))[0]).toMatchObject({ admitted: 1, units: 1 });
    expect(spooled.size()).toBe(0);
    expect(await spooled.sealed()).toEqual([]);
  });

  it('keeps what it cannot write yet and writes it on a later try', async () => {
    const h = history();
    let away = true;
    const spooled = store();
    const spool = new UsageSpool({
      store: spooled,
      replay: async (s) => {
        if (away) throw new Error('Command timed out');
        await h.replay(s);
      },
      log: quiet,
    });
    const at = hourAgo();
    spool.count('key_c', 'admitted', 1, at);
    await spool.replay();
    spool.count('key_c', 'admitted', 1, at);
    await spool.replay();
    expect(spooled.size()).toBe(2);
    away = false;
    await spool.replay();
    expect((await h.hours('key_c', at - HOUR_MS, at + HOUR_MS))[0]).toMatchObject({ admitted: 2 });
    expect(spooled.size()).toBe(0);
  });
});

describe('FileSpoolStore', () => {
  it('gives a successor what a killed predecessor appended, less a last line cut short', async () => {
    const where = join(dir, randomUUID());
    const first = new FileSpoolStore(where);
    const at = hourAgo();
    for (let i = 0; i < 3; i++) first.append({ id: 'key_d', outcome: 'admitted', units: 1, hour: at - (at % HOUR_MS) });
    // The predecessor died mid-line: never sealed, its last record half written.
    const [open] = readdirSync(where);
    appendFileSync(join(where, open as string), '{"id":"key_d","outc');
    const successor = new FileSpoolStore(where);
    const segments = await successor.sealed();
    expect(segments.map((s) => s.records.length)).toEqual([3]);
    const h = history();
    await h.replay(segments[0] as (typeof segments)[0]);
    expect((await h.hours('key_d', at - HOUR_MS, at + HOUR_MS))[0]).toMatchObject({ admitted: 3, units: 3 });
  });
});
