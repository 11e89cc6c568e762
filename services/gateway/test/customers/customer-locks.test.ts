import { randomUUID } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { type CustomerLocks, MemoryCustomerLocks, RedisCustomerLocks } from '../../src/customers/customer-locks.js';
import { useRedisClient } from '../support/helpers.js';

const redis = useRedisClient();

/** A promise the test settles, and whether the work waiting on it has started. */
function step() {
  let finish = () => {};
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const state = { started: false, finish, done };
  return state;
}

/** Lets every callback and Redis answer that is due run (I/O included), without a timer. */
async function settle(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** Until a work has started (a Redis lock takes round trips). */
const started = (s: { started: boolean }) => vi.waitFor(() => expect(s.started).toBe(true), { interval: 5 });

/** What every CustomerLocks must do; `make` gives one on fresh state. */
function customerLocksContract(name: string, make: () => CustomerLocks): void {
  describe(`${name} (CustomerLocks contract)`, () => {
    it('runs one work at a time for a customer, in turn, and answers each its own result', async () => {
      const locks = make();
      const steps = [step(), step(), step()];
      const runs = steps.map((s, i) =>
        locks.run('cus_a', async () => {
          s.started = true;
          await s.done;
          return i;
        }),
      );
      for (const [i, s] of steps.entries()) {
        await started(s);
        await settle();
        expect(steps.map((t) => t.started)).toEqual(steps.map((_, j) => j <= i));
        s.finish();
      }
      expect(await Promise.all(runs)).toEqual([0, 1, 2]);
    });

    it('does not hold one customer’s work behind another’s', async () => {
      const locks = make();
      const a = step();
      const held = locks.run('cus_a', async () => {
        a.started = true;
        await a.done;
      });
      expect(await locks.run('cus_b', async () => 'b')).toBe('b');
      expect(a.started).toBe(true);
      a.finish();
      await held;
    });

    it('frees the lock when the work throws, and the caller gets the error', async () => {
      const locks = make();
      await expect(
        locks.run('cus_a', async () => {
          throw new Error('no');
        }),
      ).rejects.toThrow('no');
      expect(await locks.run('cus_a', async () => 'next')).toBe('next');
    });
  });
}

customerLocksContract('MemoryCustomerLocks', () => new MemoryCustomerLocks());
customerLocksContract('RedisCustomerLocks', () => new RedisCustomerLocks(redis(), `cl${randomUUID().slice(0, 8)}:`));

describe('RedisCustomerLocks across replicas', () => {
  it('holds a customer’s work on one replica while another replica’s runs', async () => {
    const prefix = `cl${randomUUID().slice(0, 8)}:`;
    const [one, two] = [new RedisCustomerLocks(redis(), prefix), new RedisCustomerLocks(redis(), prefix)];
    const first = step();
    const held = one.run('cus_a', async () => {
      first.started = true;
      await first.done;
    });
    await started(first);
    let second = false;
    const waiting = two.run('cus_a', async () => {
      second = true;
    });
    await settle();
    expect(second).toBe(false);
    first.finish();
    await held;
    await waiting;
    expect(second).toBe(true);
    expect(await redis().keys(`${prefix}*`)).toEqual([]);
  });

  it('never frees a lock that is no longer its own (it expired and another replica took it)', async () => {
    const prefix = `cl${randomUUID().slice(0, 8)}:`;
    const locks = new RedisCustomerLocks(redis(), prefix);
    const name = `${prefix}lock:customer:cus_a`;
    await locks.run('cus_a', async () => {
      await redis().set(name, 'another-replica', 'PX', 10_000);
    });
    expect(await redis().get(name)).toBe('another-replica');
  });
});
