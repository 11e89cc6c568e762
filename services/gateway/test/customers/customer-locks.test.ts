import { randomUUID } from 'node:crypto';
import { ApiError } from '@animal-store/common/errors.js';
import { describe, expect, it, vi } from 'vitest';
import {
  type CustomerLocks,
  LOCK_TTL_MS,
  MemoryCustomerLocks,
  RedisCustomerLocks,
} from '../../src/customers/customer-locks.js';
import { connected, useRedisClient } from '../support/helpers.js';

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
function customerLocksContract(name: string, kind: CustomerLocks['kind'], make: () => CustomerLocks): void {
  describe(`${name} (CustomerLocks contract)`, () => {
    it(`says where it holds its locks (${kind})`, () => {
      expect(make().kind).toBe(kind);
    });

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

    it('holds a work that comes while the second in line runs, after the first has finished', async () => {
      const locks = make();
      const [first, second, third] = [step(), step(), step()];
      const run = (s: ReturnType<typeof step>) =>
        locks.run('cus_a', async () => {
          s.started = true;
          await s.done;
        });
      const runs = [run(first), run(second)];
      await started(first);
      first.finish();
      await started(second);
      runs.push(run(third));
      await settle();
      expect(third.started).toBe(false);
      second.finish();
      await started(third);
      third.finish();
      await Promise.all(runs);
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

customerLocksContract('MemoryCustomerLocks', 'memory', () => new MemoryCustomerLocks());
customerLocksContract(
  'RedisCustomerLocks',
  'redis',
  () => new RedisCustomerLocks(redis(), `cl${randomUUID().slice(0, 8)}:`),
);

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

describe('RedisCustomerLocks when a replica dies or waits too long', () => {
  it('ends a lock its holder never freed after its time to live (LOCK_TTL_MS unless given): another replica then takes it', async () => {
    const prefix = `cl${randomUUID().slice(0, 8)}:`;
    const name = `${prefix}lock:customer:cus_a`;
    // Held with the default time to live: it ends on its own within LOCK_TTL_MS.
    await new RedisCustomerLocks(redis(), prefix).run('cus_a', async () => {
      const ttl = await redis().pttl(name);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(LOCK_TTL_MS);
    });
    expect(await redis().exists(name)).toBe(0);

    // A replica whose connection dies while it holds the lock: its release never reaches Redis.
    const dying = redis().duplicate();
    dying.on('error', () => {});
    await connected(dying);
    const dead = new RedisCustomerLocks(dying, prefix, { ttlMs: 1_000 });
    expect(
      await dead.run('cus_a', async () => {
        await dying.quit();
        return 'made';
      }),
    ).toBe('made');
    const left = await redis().pttl(name);
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(1_000);

    // Another replica (the default wait, 5 s) takes the lock once it has ended, and frees it after.
    let ran = false;
    await new RedisCustomerLocks(redis(), prefix).run('cus_a', async () => {
      ran = true;
      expect(await redis().exists(name)).toBe(1);
    });
    expect(ran).toBe(true);
    expect(await redis().exists(name)).toBe(0);
  });

  it('gives up with 409 conflict when another replica holds the lock past its wait, without running its work', async () => {
    const prefix = `cl${randomUUID().slice(0, 8)}:`;
    const holder = step();
    const held = new RedisCustomerLocks(redis(), prefix).run('cus_a', async () => {
      holder.started = true;
      await holder.done;
    });
    await started(holder);
    let ran = false;
    const refused = await new RedisCustomerLocks(redis(), prefix, { waitMs: 50 })
      .run('cus_a', async () => {
        ran = true;
      })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ApiError);
    expect((refused as ApiError).toBody()).toEqual({
      code: 'conflict',
      status: 409,
      message: 'Another change to your keys is under way; try again',
    });
    expect(ran).toBe(false);
    // The holder's lock is untouched, and the next run after it is made.
    expect(await redis().exists(`${prefix}lock:customer:cus_a`)).toBe(1);
    holder.finish();
    await held;
    expect(await new RedisCustomerLocks(redis(), prefix, { waitMs: 50 }).run('cus_a', async () => 'next')).toBe('next');
  });

  // Its wait is its own: a lock that would end on its own 2 s later is not waited for past 50 ms.
  it('gives up within the wait it was given, though the lock it waits for ends on its own later', async () => {
    const prefix = `cl${randomUUID().slice(0, 8)}:`;
    await redis().set(`${prefix}lock:customer:cus_a`, 'a-replica-that-died', 'PX', 2_000);
    let ran = false;
    const refused = await new RedisCustomerLocks(redis(), prefix, { waitMs: 50 })
      .run('cus_a', async () => {
        ran = true;
      })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ApiError);
    expect(ran).toBe(false);
    expect(await redis().get(`${prefix}lock:customer:cus_a`)).toBe('a-replica-that-died');
  });
});
