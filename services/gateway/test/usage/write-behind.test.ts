import { afterEach, describe, expect, it, vi } from 'vitest';
import { WriteBehind } from '../../src/usage/write-behind.js';

/**
 * The batch the usage history and the credit refunds write behind the request path: what waits is
 * written once, a second after the batch's first value or at flush(), whichever comes first.
 */

afterEach(() => {
  vi.useRealTimers();
});

/** A batcher of sums whose writes are recorded (and fail while `failing` is set), and its errors. */
function sums() {
  const writes: Array<Record<string, number>> = [];
  const errors: unknown[] = [];
  const state = { failing: null as Error | null, reported: (_err: unknown) => {} };
  const batch = new WriteBehind<number>(
    async (pending) => {
      writes.push(Object.fromEntries(pending));
      if (state.failing) throw state.failing;
    },
    (err) => {
      errors.push(err);
      state.reported(err);
    },
  );
  const add = (key: string, n: number) => batch.set(key, (batch.get(key) ?? 0) + n);
  /** Settles with the next error given to onError. */
  const nextError = () =>
    new Promise<unknown>((resolve) => {
      state.reported = resolve;
    });
  return { batch, add, writes, errors, state, nextError };
}

describe('WriteBehind', () => {
  it('writes what waits once, a second after the first value, not before', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { add, writes } = sums();
    add('a', 1);
    await vi.advanceTimersByTimeAsync(500);
    add('a', 2);
    add('b', 5);
    await vi.advanceTimersByTimeAsync(499);
    expect(writes).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(writes).toEqual([{ a: 3, b: 5 }]);
    // Nothing waits: no timer, no empty write.
    await vi.advanceTimersByTimeAsync(5_000);
    expect(writes).toHaveLength(1);
    add('a', 4);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(writes).toEqual([{ a: 3, b: 5 }, { a: 4 }]);
  });

  it('flush() writes at once and resolves after the write; a value taken meanwhile waits its own second', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { batch, add, writes } = sums();
    add('a', 1);
    await vi.advanceTimersByTimeAsync(500);
    const flushed = batch.flush();
    add('a', 10);
    await flushed;
    expect(writes).toEqual([{ a: 1 }]);
    // The flushed batch's timer went with it: the next batch is written a second after its first value.
    await vi.advanceTimersByTimeAsync(999);
    expect(writes).toEqual([{ a: 1 }]);
    await vi.advanceTimersByTimeAsync(1);
    expect(writes).toEqual([{ a: 1 }, { a: 10 }]);
    // Nothing waits: a flush writes nothing.
    await batch.flush();
    expect(writes).toHaveLength(2);
  });

  // A caller's flush (a test's, the shutdown's) must not return while the timer's write of the
  // values it set is still under way: they are not yet written.
  it('flush() resolves only once a write the timer started is done', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    let finish = () => {};
    const done: string[] = [];
    const batch = new WriteBehind<number>(
      (pending) =>
        new Promise<void>((resolve) => {
          finish = () => {
            done.push(...pending.keys());
            resolve();
          };
        }),
      () => {},
    );
    batch.set('a', 1);
    await vi.advanceTimersByTimeAsync(1_000);
    let flushed = false;
    const flush = batch.flush().then(() => {
      flushed = true;
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(flushed).toBe(false);
    finish();
    await flush;
    expect(done).toEqual(['a']);
  });

  it('a failed write rejects flush() for its caller, goes to onError when the timer wrote, and is not retried', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { batch, add, writes, errors, state, nextError } = sums();
    state.failing = new Error('redis away');
    add('a', 1);
    await expect(batch.flush()).rejects.toThrow('redis away');
    expect(errors).toEqual([]);
    add('b', 1);
    const reported = nextError();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await reported).toBe(state.failing);
    expect(errors).toHaveLength(1);
    state.failing = null;
    await batch.flush();
    expect(writes).toEqual([{ a: 1 }, { b: 1 }]);
  });

  it('keeps no process up: its timer is unref’d', () => {
    const { add } = sums();
    const timers = vi.spyOn(globalThis, 'setTimeout');
    add('a', 1);
    const timer = timers.mock.results[0]?.value as NodeJS.Timeout;
    timers.mockRestore();
    expect(timer.hasRef()).toBe(false);
    clearTimeout(timer);
  });
});
