import { describe, expect, it } from 'vitest';
import { parseCidrs } from '../../src/keys/cidrs.js';

/** A key's allowed addresses as every way of setting them reads them (admin API, CLI, keys file). */
describe('allowed addresses (parseCidrs)', () => {
  it('reads each address or CIDR once, normalised, a bare address as its one host, up to the longest prefix', () => {
    expect(
      parseCidrs(
        ['203.0.113.9', ' 203.0.113.9/32 ', '203.0.113.0/32', '2001:DB8::/64', '2001:db8::9', '0.0.0.0/0'],
        'allowedCidrs',
      ),
    ).toEqual({ cidrs: ['203.0.113.9/32', '203.0.113.0/32', '2001:db8::/64', '2001:db8::9/128', '0.0.0.0/0'] });
  });

  it('takes an entry of 64 characters, surrounding spaces included, and refuses a longer one', () => {
    const padded = '203.0.113.9'.padStart(32).padEnd(64);
    expect(parseCidrs([padded], 'allowedCidrs')).toEqual({ cidrs: ['203.0.113.9/32'] });
    expect(parseCidrs([`${padded} `], 'allowedCidrs')).toEqual({
      problem: 'allowedCidrs: each entry must be a CIDR text',
    });
  });

  it.each([
    ['not a list', '203.0.113.9', 'allowedCidrs must be a list of CIDRs such as 203.0.113.0/24 or 2001:db8::/32'],
    ['more than 100', Array(101).fill('203.0.113.9'), 'allowedCidrs may hold at most 100 CIDRs'],
    ['an entry that is not text', [42], 'allowedCidrs: each entry must be a CIDR text'],
    ['two slashes', ['10.0.0.0/8/1'], 'allowedCidrs: "10.0.0.0/8/1" is not an IPv4 or IPv6 address or CIDR'],
    ['a host name', ['example.com'], 'allowedCidrs: "example.com" is not an IPv4 or IPv6 address or CIDR'],
    ['a prefix with a letter before', ['10.0.0.0/a8'], 'allowedCidrs: "10.0.0.0/a8" has a prefix length outside 0–32'],
    ['a prefix with a letter after', ['10.0.0.0/8a'], 'allowedCidrs: "10.0.0.0/8a" has a prefix length outside 0–32'],
    ['an IPv4 prefix over 32', ['10.0.0.0/33'], 'allowedCidrs: "10.0.0.0/33" has a prefix length outside 0–32'],
    ['an IPv6 prefix over 128', ['2001:db8::/129'], 'allowedCidrs: "2001:db8::/129" has a prefix length outside 0–128'],
  ])('refuses %s, naming the field', (_label, value, problem) => {
    expect(parseCidrs(value, 'allowedCidrs')).toEqual({ problem });
  });

  it('takes exactly 100', () => {
    expect(parseCidrs(Array(100).fill('203.0.113.9'), 'allowedCidrs')).toEqual({ cidrs: ['203.0.113.9/32'] });
  });
});
