import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { expect, it } from 'vitest';
import { isRedisUnreachable } from '../../src/redis/errors.js';
import { FENCE_LUA, FencedWrites } from '../../src/redis/fenced-writes.js';
import { useRedisClient } from '../support/helpers.js';

/*
 * The fence against a real Redis: the deadline is on Redis's clock, a fenced write before it
 * applies, and one after it does nothing and fails as "Redis cannot be reached" (a 503 upstream).
 * The stalls themselves (a write that waits inside Redis past its deadline) are
 * tests/faults/late-writes.test.ts's, on a Redis of its own.
 */

const redis = useRedisClient();
const WINDOW_MS = 2_000;

async function serverMicros(): Promise<number> {
  const [seconds, micros] = await redis().time();
  return Number(seconds) * 1e6 + Number(micros);
}

it('gives a deadline one window ahead on Redis’s clock, and knows it closed a window after', async () => {
  const fences = new FencedWrites(redis());
  const before = await serverMicros();
  const fence = await fences.fence(`fw${randomUUID()}`);
  const after = await serverMicros();
  const windowUs = WINDOW_MS * 1e3;
  // Redis's time at the sample plus half its round trip, which lies within the two readings' span.
  expect(fence.deadlineUs).toBeGreaterThanOrEqual(before + windowUs);
  expect(fence.deadlineUs).toBeLessThanOrEqual(after + (after - before) + windowUs);
  expect(fence.closesAt - performance.now()).toBeGreaterThan(WINDOW_MS - 1_000);
  expect(fence.closesAt - performance.now()).toBeLessThanOrEqual(WINDOW_MS + 1_000);
});

it('applies a fenced command before its deadline', async () => {
  const fences = new FencedWrites(redis());
  const key = `fw${randomUUID()}`;
  await fences.call(key, 'SET', 'v', 'PX', 60_000);
  expect(await redis().get(key)).toBe('v');
  expect(await fences.call(key, 'GETDEL')).toBe('v');
  expect(await redis().exists(key)).toBe(0);
});

it('a script past its deadline does nothing and fails as Redis unreachable', async () => {
  const key = `fw${randomUUID()}`;
  const script = `${FENCE_LUA}
local late = fenceRefusal(ARGV[1])
if late then return late end
return redis.call('SET', KEYS[1], 'written')`;
  const past = (await serverMicros()) - 1;
  const refused = await redis()
    .eval(script, 1, key, past)
    .then(
      () => null,
      (err: unknown) => err,
    );
  expect(refused).toBeInstanceOf(Error);
  expect(String(refused)).toMatch(/^ReplyError: FENCED /);
  expect(isRedisUnreachable(refused)).toBe(true);
  expect(await redis().exists(key)).toBe(0);
  // The same script with the deadline ahead writes.
  await redis().eval(script, 1, key, (await serverMicros()) + 60_000_000);
  expect(await redis().get(key)).toBe('written');
});
