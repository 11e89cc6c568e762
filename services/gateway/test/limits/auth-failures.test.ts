import { randomUUID } from 'node:crypto';
import { freePort } from '@animal-store/tests/support/runtime.js';
import { expect, it } from 'vitest';
import { MemoryAuthFailures } from '../../src/limits/auth-failures.js';
import { RedisAuthFailures } from '../../src/limits/redis-auth-failures.js';
import { redisClient, useRedisClient } from '../support/helpers.js';
import { authFailuresContract } from './auth-failures.contract.js';

const redis = useRedisClient();

authFailuresContract('MemoryAuthFailures', async () => new MemoryAuthFailures());
authFailuresContract('RedisAuthFailures', async () => new RedisAuthFailures(redis(), `af${randomUUID().slice(0, 8)}:`));

it('RedisAuthFailures counts in memory while Redis is away: the limit holds per replica', async () => {
  // Nothing listens there: every command fails at once (no offline queue), as in an outage.
  const away = redisClient(`redis://127.0.0.1:${await freePort()}`);
  try {
    const failures = new RedisAuthFailures(away, 'away:');
    const at = Date.now();
    const counts: number[] = [];
    for (let i = 0; i < 3; i++) counts.push((await failures.record('198.51.100.9', at, 60_000)).count);
    expect(counts).toEqual([1, 2, 3]);
  } finally {
    away.disconnect();
  }
});
