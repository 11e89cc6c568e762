import { describe, expect, it } from 'vitest';
import { addressKey } from '../src/limits/anonymous-limiter.js';

describe('the per-address limiter key', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['2001:db8:1:2:aaaa:bbbb:cccc:dddd', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['2001:DB8:0001:0002:ffff::9', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
  ])('%s counts as %s', (ip, key) => {
    expect(addressKey(ip)).toBe(key);
  });

  it('gives every address of one /64 a single budget, and other /64s their own', () => {
    const a = addressKey('2001:db8:5:6::1');
    expect(addressKey('2001:db8:5:6:ffff:ffff:ffff:ffff')).toBe(a);
    expect(addressKey('2001:db8:5:7::1')).not.toBe(a);
  });
});
