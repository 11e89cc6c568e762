import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { startRedis, type TestRedis } from '@animal-store/tests/support/redis.js';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { AnonymousLimiter, addressKey } from '../../src/limits/anonymous-limiter.js';
import { connected, redisClient } from '../support/helpers.js';

describe('the per-address limiter key', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['2001:db8:1:2:aaaa:bbbb:cccc:dddd', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['2001:DB8:0001:0002:ffff::9', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    // The gap of a '::' before groups that reach into the first four.
    ['::1:2:3:4:5', '0:0:0:1::/64'],
    // A '::' standing for one group, after the first.
    ['2001::1:2:3:4:5:6', '2001:0:1:2::/64'],
    // Only the dotted IPv4-mapped form is an IPv4 client; NAT64 and hex-written addresses are IPv6.
    ['::ffff:cb00:7107', '0:0:0:0::/64'],
    ['64:ff9b::198.51.100.1', '64:ff9b:0:0::/64'],
  ])('%s counts as %s', (ip, key) => {
    expect(addressKey(ip)).toBe(key);
  });

  it('gives every address of one /64 a single budget, and other /64s their own', () => {
    const a = addressKey('2001:db8:5:6::1');
    expect(addressKey('2001:db8:5:6:ffff:ffff:ffff:ffff')).toBe(a);
    expect(addressKey('2001:db8:5:7::1')).not.toBe(a);
  });
});

describe('the per-address limiter on Redis', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });
  const client = async () => {
    const c = await connected(redisClient(redis.url));
    onTestFinished(() => c.disconnect());
    return c;
  };

  it('shares an address’s budget between the replicas of one deployment, not with another deployment', async () => {
    const prefix = `t${randomUUID().slice(0, 8)}:`;
    const [a, b, other] = [
      new AnonymousLimiter(3, await client(), prefix),
      new AnonymousLimiter(3, await client(), prefix),
      new AnonymousLimiter(3, await client(), `${prefix}x:`),
    ];
    const ip = '203.0.113.9';
    const allowed = [];
    for (const limiter of [a, b, a, b]) allowed.push((await limiter.consume(ip)).allowed);
    expect(allowed).toEqual([true, true, true, false]);
    const fresh = await other.consume(ip);
    expect(fresh).toMatchObject({
      allowed: true,
      window: { name: 'anonymous', limit: 3, remaining: 2, windowSeconds: 60 },
    });
  });

  it('still limits each address on this replica while Redis is unreachable', async () => {
    const c = await client();
    const limiter = new AnonymousLimiter(2, c, `t${randomUUID().slice(0, 8)}:`);
    const ended = once(c, 'end');
    c.disconnect();
    await ended;
    const decisions = [];
    for (let i = 0; i < 3; i++) decisions.push(await limiter.consume('198.51.100.20'));
    expect(decisions.map((d) => [d.allowed, d.window.remaining])).toEqual([
      [true, 1],
      [true, 0],
      [false, 0],
    ]);
    expect((await limiter.consume('198.51.100.21')).allowed).toBe(true);
  });
});
