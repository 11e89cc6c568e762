import { randomBytes } from 'node:crypto';
import { ApiError } from '@animal-store/common/errors.js';
import type { Redis, Result } from 'ioredis';
import type { RedisClient } from '../redis/clients.js';

/**
 * One change at a time per customer, for what must read and then write (the portal's key create:
 * count the live keys, insert one below maxKeys). Neither store the keys live in can do it in one
 * step: MongoDB would need a transaction (a replica set) or a counter that every other path (the
 * admin's revoke, a key moved to another customer) would have to keep true.
 */
export interface CustomerLocks {
  readonly kind: 'redis' | 'memory';
  /** Runs `work` once no other work for this customer holds the lock, and frees it after, thrown or not. */
  run<T>(customerId: string, work: () => Promise<T>): Promise<T>;
}

/** This process's: exact for one replica (and the memory key store is one replica's). */
export class MemoryCustomerLocks implements CustomerLocks {
  readonly kind = 'memory';
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(customerId: string, work: () => Promise<T>): Promise<T> {
    const before = this.tails.get(customerId) ?? Promise.resolve();
    let release = () => {};
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = before.then(() => mine);
    this.tails.set(customerId, tail);
    await before;
    try {
      return await work();
    } finally {
      release();
      // The last in line leaves nothing behind: a customer's entry lives while someone waits.
      if (this.tails.get(customerId) === tail) this.tails.delete(customerId);
    }
  }
}

/** Frees the lock only while it is still the holder's token: one that expired and was taken is not freed. */
const RELEASE_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    gatewayReleaseLock(key: string, token: string): Result<number, Context>;
  }
}

/** How long a lock lives if its holder dies holding it; a create takes milliseconds. */
export const LOCK_TTL_MS = 10_000;
/** How long a request waits for the lock before it gives up with 409. */
const WAIT_MS = 5_000;

/** The lock's times, LOCK_TTL_MS and WAIT_MS unless given (tests give short ones). */
interface CustomerLockTimes {
  /** How long a lock lives when its holder never frees it (it died, or Redis was away at the release). */
  ttlMs?: number;
  /** How long a run waits for a lock another replica holds before it gives up with 409. */
  waitMs?: number;
}

/**
 * Shared by the replicas through Redis (`<prefix>lock:customer:<id>`, SET NX PX with a token):
 * exact across them while the holder finishes within the lock's time to live (LOCK_TTL_MS).
 * Within a replica the memory lock queues its own requests first, so only one per replica ever
 * waits on Redis.
 */
export class RedisCustomerLocks implements CustomerLocks {
  readonly kind = 'redis';
  private readonly local = new MemoryCustomerLocks();
  private readonly ttlMs: number;
  private readonly waitMs: number;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    times: CustomerLockTimes = {},
  ) {
    this.ttlMs = times.ttlMs ?? LOCK_TTL_MS;
    this.waitMs = times.waitMs ?? WAIT_MS;
    if (typeof (redis as Partial<Redis>).gatewayReleaseLock !== 'function') {
      redis.defineCommand('gatewayReleaseLock', { numberOfKeys: 1, lua: RELEASE_SCRIPT });
    }
  }

  run<T>(customerId: string, work: () => Promise<T>): Promise<T> {
    return this.local.run(customerId, async () => {
      const name = `${this.prefix}lock:customer:${customerId}`;
      // Whose lock it is: only its holder frees it (RELEASE_SCRIPT).
      const token = randomBytes(16).toString('base64url');
      await this.acquire(name, token);
      try {
        return await work();
      } finally {
        // A release that fails (Redis away) must not turn a made key into an error whose key
        // is lost: the lock ends on its own within its time to live.
        await this.redis.gatewayReleaseLock(name, token).catch(() => undefined);
      }
    });
  }

  /** Takes the lock, asking again while another replica holds it (a few ms apart, then less often). */
  private async acquire(name: string, token: string): Promise<void> {
    const gaveUpAt = Date.now() + this.waitMs;
    for (let pause = 5; ; pause = Math.min(pause * 2, 100)) {
      if ((await this.redis.set(name, token, 'PX', this.ttlMs, 'NX')) === 'OK') return;
      if (Date.now() + pause > gaveUpAt) {
        throw new ApiError(409, 'conflict', 'Another change to your keys is under way; try again');
      }
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}
