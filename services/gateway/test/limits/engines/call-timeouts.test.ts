import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CallTimeouts } from '../../../src/limits/engines/call-timeouts.js';

// The fake timers drive both the timer and the clock the timeouts read.
beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

function timeouts(ms: number) {
  const fired: string[] = [];
  const clock = new CallTimeouts(ms, () => Date.now());
  const start = (name: string) => clock.start(() => fired.push(name));
  return { clock, fired, start };
}

describe('CallTimeouts', () => {
  it('fires a call not settled once, at its timeout and not before', () => {
    const { fired, start } = timeouts(200);
    start('a');
    vi.advanceTimersByTime(199);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual(['a']);
    vi.advanceTimersByTime(10_000);
    expect(fired).toEqual(['a']);
  });

  it('never fires a call settled in time, and leaves no timer once all are done', () => {
    const { clock, fired, start } = timeouts(200);
    const calls = Array.from({ length: 50 }, (_, i) => start(`c${i}`));
    for (const call of calls) call.settle();
    expect(clock.size).toBe(0);
    vi.advanceTimersByTime(1_000);
    expect(fired).toEqual([]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('times each call from its own start, with one timer for all of them', () => {
    const { fired, start } = timeouts(100);
    const calls = new Map<string, { settle(): void }>();
    for (let i = 0; i < 10; i++) {
      calls.set(`c${i}`, start(`c${i}`));
      expect(vi.getTimerCount()).toBe(1);
      if (i < 9) vi.advanceTimersByTime(10);
    }
    calls.get('c0')?.settle();
    calls.get('c3')?.settle();
    // At 100 ms c0 would have fired: it settled. c1 started at 10 ms fires at 110.
    vi.advanceTimersByTime(10);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(10);
    expect(fired).toEqual(['c1']);
    vi.advanceTimersByTime(20);
    expect(fired).toEqual(['c1', 'c2']);
    vi.advanceTimersByTime(1_000);
    expect(fired).toEqual(['c1', 'c2', 'c4', 'c5', 'c6', 'c7', 'c8', 'c9']);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('fires calls of the same instant together, and times calls their handlers start', () => {
    const fired: string[] = [];
    const clock = new CallTimeouts(50, () => Date.now());
    clock.start(() => fired.push('a'));
    clock.start(() => {
      fired.push('b');
      clock.start(() => fired.push('retry'));
    });
    vi.advanceTimersByTime(50);
    expect(fired).toEqual(['a', 'b']);
    expect(clock.size).toBe(1);
    vi.advanceTimersByTime(50);
    expect(fired).toEqual(['a', 'b', 'retry']);
  });

  it('holds a call whose timer fired early by the clock until its time', () => {
    // A timer may fire before the clock the calls are timed by says the time is up (Node's loop
    // time is read once a turn): the call waits for a second fire rather than failing early.
    let lag = 0;
    const fired: string[] = [];
    const clock = new CallTimeouts(100, () => Date.now() - lag);
    clock.start(() => fired.push('a'));
    lag = 5;
    vi.advanceTimersByTime(100);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(5);
    expect(fired).toEqual(['a']);
  });

  it('stays right across many thousands of calls (the settled ones dropped as it goes)', () => {
    const { clock, fired, start } = timeouts(100);
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < 3_000; i++) start(`r${round}-${i}`).settle();
      start(`r${round}-late`);
      vi.advanceTimersByTime(100);
    }
    expect(fired).toEqual(['r0-late', 'r1-late', 'r2-late', 'r3-late', 'r4-late']);
    expect(clock.size).toBe(0);
  });
});
