import type { Redis, Result } from 'ioredis';
import type { RedisClient } from '../redis/clients.js';
import type { IdempotencyStore } from './idempotency-store.js';

/** Compare and set, keeping the key's expiry. KEYS: the record; ARGV: what it must hold, what it becomes. */
const REPLACE_SCRIPT = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
return 1
`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    gatewayIdempotencyReplace(key: string, from: string, to: string): Result<number, Context>;
  }
}

/** One string key per record (`<prefix>idempotency:<key>`), expiring with it: any Cluster slot. */
export class RedisIdempotencyStore implements IdempotencyStore {
  readonly kind = 'redis';

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {
    if (typeof (redis as Partial<Redis>).gatewayIdempotencyReplace !== 'function') {
      redis.defineCommand('gatewayIdempotencyReplace', { numberOfKeys: 1, lua: REPLACE_SCRIPT });
    }
  }

  private keyName(key: string): string {
    return `${this.prefix}idempotency:${key}`;
  }

  async claim(key: string, value: string, ttlMs: number): Promise<string | null> {
    // SET NX GET (Redis 7): one command keeps it or answers what is kept.
    return this.redis.set(this.keyName(key), value, 'PX', ttlMs, 'NX', 'GET');
  }

  async replace(key: string, from: string, to: string): Promise<boolean> {
    return (await this.redis.gatewayIdempotencyReplace(this.keyName(key), from, to)) === 1;
  }
}
