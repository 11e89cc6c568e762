import type { LookupAddress, LookupOptions } from 'node:dns';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Address4, Address6 } from 'ip-address';
import { SPECIAL_PURPOSE as PACKAGE_IPV4 } from 'ip-address/dist/v4/constants.js';
import { SPECIAL_PURPOSE as PACKAGE_IPV6 } from 'ip-address/dist/v6/constants.js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  checkWebhookUrl,
  forbiddenAddress,
  guardedLookup,
  type Lookup,
  WebhookUrlError,
} from '../../src/webhooks/delivery/address-guard.js';
import { WebhookSender } from '../../src/webhooks/delivery/send.js';

/** The SSRF rules for webhook endpoints, as tables: each address, then each URL and what it resolves to. */

type Verdict = 'allowed' | 'refused';
/** The registry's "Globally Reachable" column: True, False, N/A, or left blank. */
type Reachable = true | false | 'N/A' | 'blank';

interface RegistryEntry {
  block: string;
  name: string;
  reachable: Reachable;
  /** Addresses in the block (its edges where they differ) and what the guard does with them. */
  inside: Array<[string, Verdict]>;
  /** Addresses just outside it, where the answer there says something. */
  outside: Array<[string, Verdict]>;
}

const A: Verdict = 'allowed';
const R: Verdict = 'refused';

/**
 * Every entry of the IANA IPv4 Special-Purpose Address Registry (iana-ipv4-special-registry, as
 * updated 2025-10), written out here from the registry, not from the package the guard uses.
 * Only an explicit True lets an address through; the blank 6to4 relay anycast block is refused.
 */
const IPV4_REGISTRY: RegistryEntry[] = [
  {
    block: '0.0.0.0/8',
    name: 'This network',
    reachable: false,
    inside: [
      ['0.0.0.1', R],
      ['0.255.255.255', R],
    ],
    outside: [['1.0.0.0', A]],
  },
  { block: '0.0.0.0/32', name: 'This host on this network', reachable: false, inside: [['0.0.0.0', R]], outside: [] },
  {
    block: '10.0.0.0/8',
    name: 'Private-Use',
    reachable: false,
    inside: [
      ['10.0.0.0', R],
      ['10.255.255.255', R],
    ],
    outside: [
      ['9.255.255.255', A],
      ['11.0.0.0', A],
    ],
  },
  {
    block: '100.64.0.0/10',
    name: 'Shared Address Space',
    reachable: false,
    inside: [
      ['100.64.0.0', R],
      ['100.127.255.255', R],
    ],
    outside: [
      ['100.63.255.255', A],
      ['100.128.0.0', A],
    ],
  },
  {
    block: '127.0.0.0/8',
    name: 'Loopback',
    reachable: false,
    inside: [
      ['127.0.0.1', R],
      ['127.255.255.255', R],
    ],
    outside: [
      ['126.255.255.255', A],
      ['128.0.0.0', A],
    ],
  },
  {
    block: '169.254.0.0/16',
    name: 'Link Local',
    reachable: false,
    inside: [
      ['169.254.169.254', R],
      ['169.254.0.0', R],
      ['169.254.255.255', R],
    ],
    outside: [
      ['169.253.255.255', A],
      ['169.255.0.0', A],
    ],
  },
  {
    block: '172.16.0.0/12',
    name: 'Private-Use',
    reachable: false,
    inside: [
      ['172.16.0.0', R],
      ['172.31.255.255', R],
    ],
    outside: [
      ['172.15.255.255', A],
      ['172.32.0.0', A],
    ],
  },
  {
    block: '192.0.0.0/24',
    name: 'IETF Protocol Assignments',
    reachable: false,
    inside: [
      ['192.0.0.11', R],
      ['192.0.0.255', R],
    ],
    outside: [
      ['191.255.255.255', A],
      ['192.0.1.0', A],
    ],
  },
  {
    block: '192.0.0.0/29',
    name: 'IPv4 Service Continuity Prefix',
    reachable: false,
    inside: [
      ['192.0.0.0', R],
      ['192.0.0.7', R],
    ],
    outside: [],
  },
  { block: '192.0.0.8/32', name: 'IPv4 dummy address', reachable: false, inside: [['192.0.0.8', R]], outside: [] },
  {
    block: '192.0.0.9/32',
    name: 'Port Control Protocol Anycast',
    reachable: true,
    inside: [['192.0.0.9', A]],
    outside: [['192.0.0.8', R]],
  },
  {
    block: '192.0.0.10/32',
    name: 'Traversal Using Relays around NAT Anycast',
    reachable: true,
    inside: [['192.0.0.10', A]],
    outside: [['192.0.0.11', R]],
  },
  {
    block: '192.0.0.170/32',
    name: 'NAT64/DNS64 Discovery',
    reachable: false,
    inside: [['192.0.0.170', R]],
    outside: [],
  },
  {
    block: '192.0.0.171/32',
    name: 'NAT64/DNS64 Discovery',
    reachable: false,
    inside: [['192.0.0.171', R]],
    outside: [],
  },
  {
    block: '192.0.2.0/24',
    name: 'Documentation (TEST-NET-1)',
    reachable: false,
    inside: [
      ['192.0.2.0', R],
      ['192.0.2.255', R],
    ],
    outside: [
      ['192.0.1.255', A],
      ['192.0.3.0', A],
    ],
  },
  { block: '192.31.196.0/24', name: 'AS112-v4', reachable: true, inside: [['192.31.196.1', A]], outside: [] },
  { block: '192.52.193.0/24', name: 'AMT', reachable: true, inside: [['192.52.193.1', A]], outside: [] },
  {
    block: '192.88.99.0/24',
    name: 'Deprecated (6to4 Relay Anycast)',
    reachable: 'blank',
    inside: [
      ['192.88.99.1', R],
      ['192.88.99.255', R],
    ],
    outside: [
      ['192.88.98.255', A],
      ['192.88.100.0', A],
    ],
  },
  {
    block: '192.88.99.2/32',
    name: '6a44-relay anycast address',
    reachable: false,
    inside: [['192.88.99.2', R]],
    outside: [],
  },
  {
    block: '192.168.0.0/16',
    name: 'Private-Use',
    reachable: false,
    inside: [
      ['192.168.0.0', R],
      ['192.168.255.255', R],
    ],
    outside: [
      ['192.167.255.255', A],
      ['192.169.0.0', A],
    ],
  },
  {
    block: '192.175.48.0/24',
    name: 'Direct Delegation AS112 Service',
    reachable: true,
    inside: [['192.175.48.1', A]],
    outside: [],
  },
  {
    block: '198.18.0.0/15',
    name: 'Benchmarking',
    reachable: false,
    inside: [
      ['198.18.0.0', R],
      ['198.19.255.255', R],
    ],
    outside: [
      ['198.17.255.255', A],
      ['198.20.0.0', A],
    ],
  },
  {
    block: '198.51.100.0/24',
    name: 'Documentation (TEST-NET-2)',
    reachable: false,
    inside: [
      ['198.51.100.0', R],
      ['198.51.100.255', R],
    ],
    outside: [
      ['198.51.99.255', A],
      ['198.51.101.0', A],
    ],
  },
  {
    block: '203.0.113.0/24',
    name: 'Documentation (TEST-NET-3)',
    reachable: false,
    inside: [
      ['203.0.113.0', R],
      ['203.0.113.255', R],
    ],
    outside: [
      ['203.0.112.255', A],
      ['203.0.114.0', A],
    ],
  },
  {
    block: '240.0.0.0/4',
    name: 'Reserved',
    reachable: false,
    inside: [
      ['240.0.0.0', R],
      ['255.255.255.254', R],
    ],
    outside: [['223.255.255.255', A]],
  },
  {
    block: '255.255.255.255/32',
    name: 'Limited Broadcast',
    reachable: false,
    inside: [['255.255.255.255', R]],
    outside: [],
  },
];

/**
 * Every entry of the IANA IPv6 Special-Purpose Address Registry (iana-ipv6-special-registry, as
 * updated 2025-10). Teredo and 6to4 (N/A: they need a relay) are refused whatever they carry; an
 * IPv4-mapped address and the well-known NAT64 prefix are decided by the IPv4 address they carry.
 */
const IPV6_REGISTRY: RegistryEntry[] = [
  { block: '::1/128', name: 'Loopback Address', reachable: false, inside: [['::1', R]], outside: [['::2', R]] },
  { block: '::/128', name: 'Unspecified Address', reachable: false, inside: [['::', R]], outside: [] },
  {
    block: '::ffff:0:0/96',
    name: 'IPv4-mapped Address',
    reachable: false,
    inside: [
      ['::ffff:127.0.0.1', R],
      ['::ffff:a9fe:a9fe', R],
      ['::ffff:8.8.8.8', A],
    ],
    outside: [
      ['::fffe:ffff:ffff', R],
      ['::1:0:0:0', R],
    ],
  },
  {
    block: '64:ff9b::/96',
    name: 'IPv4-IPv6 Translat.',
    reachable: true,
    inside: [
      ['64:ff9b::808:808', A],
      ['64:ff9b::10.0.0.1', R],
      ['64:ff9b::7f00:1', R],
    ],
    outside: [
      ['64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff', R],
      ['64:ff9b::1:0:0', R],
    ],
  },
  {
    block: '64:ff9b:1::/48',
    name: 'IPv4-IPv6 Translat.',
    reachable: false,
    inside: [
      ['64:ff9b:1::808:808', R],
      ['64:ff9b:1:ffff:ffff:ffff:ffff:ffff', R],
    ],
    outside: [],
  },
  {
    block: '100::/64',
    name: 'Discard-Only Address Block',
    reachable: false,
    inside: [
      ['100::1', R],
      ['100::ffff:ffff:ffff:ffff', R],
    ],
    outside: [],
  },
  { block: '100:0:0:1::/64', name: 'Dummy IPv6 Prefix', reachable: false, inside: [['100:0:0:1::1', R]], outside: [] },
  {
    block: '2001::/23',
    name: 'IETF Protocol Assignments',
    reachable: false,
    inside: [
      ['2001:100::1', R],
      ['2001:1ff:ffff::1', R],
      ['2001:5::1', R],
    ],
    outside: [
      ['2000:ffff:ffff:ffff::1', A],
      ['2001:200::1', A],
    ],
  },
  {
    block: '2001::/32',
    name: 'TEREDO',
    reachable: 'N/A',
    inside: [
      ['2001:0:4136:e378:8000:63bf:80ff:fffe', R],
      ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', R],
    ],
    outside: [],
  },
  {
    block: '2001:1::1/128',
    name: 'Port Control Protocol Anycast',
    reachable: true,
    inside: [['2001:1::1', A]],
    outside: [['2001:1::', R]],
  },
  {
    block: '2001:1::2/128',
    name: 'Traversal Using Relays around NAT Anycast',
    reachable: true,
    inside: [['2001:1::2', A]],
    outside: [],
  },
  {
    block: '2001:1::3/128',
    name: 'DNS-SD Service Registration Protocol Anycast',
    reachable: true,
    inside: [['2001:1::3', A]],
    outside: [['2001:1::4', R]],
  },
  {
    block: '2001:2::/48',
    name: 'Benchmarking',
    reachable: false,
    inside: [
      ['2001:2::1', R],
      ['2001:2:0:ffff::1', R],
    ],
    outside: [],
  },
  {
    block: '2001:3::/32',
    name: 'AMT',
    reachable: true,
    inside: [
      ['2001:3::1', A],
      ['2001:3:ffff::1', A],
    ],
    outside: [
      ['2001:2:ffff::1', R],
      ['2001:4::1', R],
    ],
  },
  {
    block: '2001:4:112::/48',
    name: 'AS112-v6',
    reachable: true,
    inside: [['2001:4:112::1', A]],
    outside: [
      ['2001:4:111:ffff::1', R],
      ['2001:4:113::1', R],
    ],
  },
  {
    block: '2001:10::/28',
    name: 'Deprecated (previously ORCHID)',
    reachable: 'blank',
    inside: [
      ['2001:10::1', R],
      ['2001:1f:ffff::1', R],
    ],
    outside: [],
  },
  {
    block: '2001:20::/28',
    name: 'ORCHIDv2',
    reachable: true,
    inside: [
      ['2001:20::1', A],
      ['2001:2f:ffff::1', A],
    ],
    outside: [['2001:1f:ffff::1', R]],
  },
  {
    block: '2001:30::/28',
    name: 'Drone Remote ID Protocol Entity Tags (DETs) Prefix',
    reachable: true,
    inside: [
      ['2001:30::1', A],
      ['2001:3f:ffff::1', A],
    ],
    outside: [['2001:40::1', R]],
  },
  {
    block: '2001:db8::/32',
    name: 'Documentation',
    reachable: false,
    inside: [
      ['2001:db8::1', R],
      ['2001:db8:ffff::1', R],
    ],
    outside: [
      ['2001:db7:ffff::1', A],
      ['2001:db9::1', A],
    ],
  },
  {
    block: '2002::/16',
    name: '6to4',
    reachable: 'N/A',
    inside: [
      ['2002:7f00:1::1', R],
      ['2002:808:808::1', R],
    ],
    outside: [
      ['2001:ffff:ffff::1', A],
      ['2003::1', A],
    ],
  },
  {
    block: '2620:4f:8000::/48',
    name: 'Direct Delegation AS112 Service',
    reachable: true,
    inside: [['2620:4f:8000::1', A]],
    outside: [],
  },
  {
    block: '3fff::/20',
    name: 'Documentation',
    reachable: false,
    inside: [
      ['3fff::1', R],
      ['3fff:fff:ffff::1', R],
    ],
    outside: [
      ['3ffe:ffff::1', A],
      ['3fff:1000::1', A],
    ],
  },
  {
    block: '5f00::/16',
    name: 'Segment Routing (SRv6) SIDs',
    reachable: false,
    inside: [
      ['5f00::1', R],
      ['5f00:ffff::1', R],
    ],
    // Its neighbours lie outside global unicast (2000::/3) too: nothing to tell apart there.
    outside: [],
  },
  {
    block: 'fc00::/7',
    name: 'Unique-Local',
    reachable: false,
    inside: [
      ['fc00::1', R],
      ['fdff:ffff::1', R],
    ],
    outside: [],
  },
  {
    block: 'fe80::/10',
    name: 'Link-Local Unicast',
    reachable: false,
    inside: [
      ['fe80::1', R],
      ['febf:ffff::1', R],
    ],
    outside: [],
  },
];

/** Whether an address lies in a block (both of one family). */
const contains = (block: string, address: string) =>
  address.includes(':')
    ? new Address6(address).isInSubnet(new Address6(block))
    : new Address4(address).isInSubnet(new Address4(block));

const prefixLength = (block: string) => Number(block.split('/')[1]);
/** The most specific entry holding an address. */
const decidingBlock = (registry: RegistryEntry[], address: string) =>
  registry.filter((e) => contains(e.block, address)).sort((a, b) => prefixLength(b.block) - prefixLength(a.block))[0]
    ?.block;

describe.each([
  ['IPv4', IPV4_REGISTRY, PACKAGE_IPV4],
  ['IPv6', IPV6_REGISTRY, PACKAGE_IPV6],
])('the IANA %s special-purpose registry', (_family, registry, packaged) => {
  it('is the one the guard’s package carries, entry for entry', () => {
    // N/A counts as "not globally reachable" in the package; a blank is its null.
    const ours = registry.map((e) => [
      e.block,
      e.reachable === 'N/A' ? false : e.reachable === 'blank' ? null : e.reachable,
    ]);
    expect(new Set(ours.map((e) => JSON.stringify(e)))).toEqual(
      new Set(packaged.map(([cidr, , reachable]) => JSON.stringify([cidr, reachable]))),
    );
  });

  it.each(registry)('$block ($name, globally reachable: $reachable)', ({ block, inside, outside }) => {
    for (const [address] of inside) expect(contains(block, address), `${address} in ${block}`).toBe(true);
    for (const [address] of outside) expect(contains(block, address), `${address} outside ${block}`).toBe(false);
    for (const [address, verdict] of [...inside, ...outside]) {
      const reason = forbiddenAddress(address);
      if (verdict === 'allowed') expect(reason, address).toBeUndefined();
      else expect(reason, address).toEqual(expect.any(String));
    }
  });

  it.each(registry.filter((e) => e.reachable !== true))('names $block in its refusals', ({ block, inside }) => {
    // Where a more specific block holds the address, that block decides (and is named) instead.
    const decided = inside.filter(([address, verdict]) => verdict === R && decidingBlock(registry, address) === block);
    expect(decided.length, `a witness that ${block} decides`).toBeGreaterThan(0);
    for (const [address] of decided) expect(forbiddenAddress(address)).toContain(`(${block})`);
  });
});

/** An IPv6 address carrying an IPv4 one goes where the IPv4 address is: each form, decoded. */
const CARRIERS: Array<[string, string]> = [
  ['::127.0.0.1', 'IPv4-compatible (::/96) carrying 127.0.0.1, Loopback (127.0.0.0/8)'],
  ['::a9fe:a9fe', 'IPv4-compatible (::/96) carrying 169.254.169.254, Link Local (169.254.0.0/16)'],
  ['::8.8.8.8', 'IPv4-compatible (::/96) carrying 8.8.8.8'],
  ['::ffff:0:808:808', 'IPv4-translated (::ffff:0:0:0/96) carrying 8.8.8.8'],
  ['::ffff:0:7f00:1', 'IPv4-translated (::ffff:0:0:0/96) carrying 127.0.0.1, Loopback (127.0.0.0/8)'],
  ['::ffff:7f00:1', 'IPv4-mapped (::ffff:0:0/96) carrying 127.0.0.1, Loopback (127.0.0.0/8)'],
  ['::ffff:10.1.2.3', 'IPv4-mapped (::ffff:0:0/96) carrying 10.1.2.3, Private-Use (10.0.0.0/8)'],
  ['64:ff9b::a9fe:a9fe', 'NAT64 (64:ff9b::/96) carrying 169.254.169.254, Link Local (169.254.0.0/16)'],
  ['64:ff9b::192.0.2.1', 'NAT64 (64:ff9b::/96) carrying 192.0.2.1, Documentation (TEST-NET-1) (192.0.2.0/24)'],
  ['64:ff9b:1::a9fe:a9fe', 'IPv4-IPv6 Translat. (64:ff9b:1::/48)'],
  ['2002:808:808::1', '6to4 (2002::/16) carrying 8.8.8.8'],
  ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', 'TEREDO (2001::/32) carrying 8.8.8.8'],
  ['2002:c0a8:0101::1', '6to4 (2002::/16) carrying 192.168.1.1, Private-Use (192.168.0.0/16)'],
  // Teredo: server 65.54.227.120, client 127.0.0.1 stored inverted (80ff:fffe).
  ['2001:0:4136:e378:8000:63bf:80ff:fffe', 'TEREDO (2001::/32) carrying 127.0.0.1, Loopback (127.0.0.0/8)'],
  ['[fe80::1%eth0]', 'Link-Local Unicast (fe80::/10)'],
  ['ff02::1', 'Multicast (ff00::/8)'],
  ['fec0::1', 'not global unicast (outside 2000::/3)'],
  ['224.0.0.1', 'Multicast (224.0.0.0/4)'],
  // :: and ::1 are named for what they are, not read as IPv4-compatible addresses of 0.0.0.0 and 0.0.0.1.
  ['::1', 'Loopback Address (::1/128)'],
  ['::', 'Unspecified Address (::/128)'],
  // What is no address is not read as the one it resembles.
  ['hooks.example.com', 'not an IP address'],
  ['1.2.3.[4', 'not an IP address'],
  ['1.2.]3.4', 'not an IP address'],
];

describe('forbiddenAddress', () => {
  it.each(CARRIERS)('refuses %s: %s', (address, reason) => {
    expect(forbiddenAddress(address)).toBe(reason);
  });

  it.each(['8.8.8.8', '93.184.216.34', '2606:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808', '[2001:4:112::1]'])(
    'allows %s',
    (address) => {
      expect(forbiddenAddress(address)).toBeUndefined();
    },
  );
});

const strict = { allowInsecure: false, allowPrivate: false };
/** DNS as a table: each name and what it resolves to. */
const dns: Record<string, string[]> = {
  'hooks.example.com': ['93.184.216.34'],
  'internal.example.com': ['10.0.0.5'],
  // One public and one private answer: the private one is where a request could go.
  'split.example.com': ['93.184.216.34', '192.168.0.10'],
  'v6only.example.com': ['::1'],
  'docs.example.com': ['2001:db8::5'],
};
const lookup: Lookup = async (host) => {
  // A resolver failing without a code (not an errno error).
  if (host === 'broken.example.com') throw new Error('resolver crashed');
  const found = dns[host];
  if (!found) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
  return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};

const URLS: Array<[string, typeof strict, string | null]> = [
  ['https://hooks.example.com/x', strict, null],
  ['https://93.184.216.34/x', strict, null],
  ['http://hooks.example.com/x', strict, 'must be https://'],
  ['http://hooks.example.com/x', { ...strict, allowInsecure: true }, null],
  ['ftp://hooks.example.com/x', { ...strict, allowInsecure: true }, 'must be http:// or https://'],
  ['https://u:p@hooks.example.com/x', strict, 'credentials'],
  ['https://token@hooks.example.com/x', strict, 'credentials'],
  ['https://:p@hooks.example.com/x', strict, 'credentials'],
  ['https://internal.example.com/x', strict, 'resolves to 10.0.0.5: Private-Use (10.0.0.0/8)'],
  ['https://split.example.com/x', strict, 'resolves to 192.168.0.10: Private-Use (192.168.0.0/16)'],
  ['https://v6only.example.com/x', strict, 'resolves to ::1: Loopback Address (::1/128)'],
  ['https://docs.example.com/x', strict, 'resolves to 2001:db8::5: Documentation (2001:db8::/32)'],
  ['https://nowhere.example.com/x', strict, 'does not resolve (ENOTFOUND)'],
  ['https://broken.example.com/x', strict, 'does not resolve (error)'],
  ['https://[::ffff:169.254.169.254]/', strict, 'Link Local'],
  ['https://2130706433/', strict, 'Loopback'],
  ['https://0x7f.1/', strict, 'Loopback'],
  // What an outside attack run found accepted: each refused now, naming what it is.
  ['https://[::127.0.0.1]/', strict, 'carrying 127.0.0.1, Loopback'],
  ['https://[::a9fe:a9fe]/', strict, 'carrying 169.254.169.254, Link Local'],
  ['https://[::ffff:0:7f00:1]/', strict, 'IPv4-translated (::ffff:0:0:0/96) carrying 127.0.0.1'],
  ['https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/', strict, 'TEREDO (2001::/32) carrying 127.0.0.1'],
  ['https://[64:ff9b:1::a9fe:a9fe]/', strict, 'IPv4-IPv6 Translat. (64:ff9b:1::/48)'],
  ['https://[100::1]/', strict, 'Discard-Only Address Block (100::/64)'],
  ['https://[2001:db8::1]/', strict, 'Documentation (2001:db8::/32)'],
  ['https://[2001:2::1]/', strict, 'Benchmarking (2001:2::/48)'],
  ['https://[2001:100::1]/', strict, 'IETF Protocol Assignments (2001::/23)'],
  ['https://[5f00::1]/', strict, 'Segment Routing (SRv6) SIDs (5f00::/16)'],
  ['https://192.0.2.1/', strict, 'Documentation (TEST-NET-1) (192.0.2.0/24)'],
  ['https://198.51.100.1/', strict, 'Documentation (TEST-NET-2) (198.51.100.0/24)'],
  ['https://203.0.113.1/', strict, 'Documentation (TEST-NET-3) (203.0.113.0/24)'],
  ['https://internal.example.com/x', { ...strict, allowPrivate: true }, null],
  ['/relative', strict, 'absolute URL'],
];

describe('checkWebhookUrl', () => {
  it.each(URLS)('%s with %o: %s', async (url, rules, problem) => {
    const checked = checkWebhookUrl(url, rules, lookup);
    if (problem === null) await expect(checked).resolves.toBeInstanceOf(URL);
    else {
      await expect(checked).rejects.toBeInstanceOf(WebhookUrlError);
      await expect(checked).rejects.toThrow(problem);
    }
  });

  it('says in full why an address is refused and what would allow it', async () => {
    await expect(checkWebhookUrl('https://internal.example.com/x', strict, lookup)).rejects.toThrow(
      new WebhookUrlError(
        "url's internal.example.com resolves to 10.0.0.5: Private-Use (10.0.0.0/8), not globally reachable; endpoints must be public (WEBHOOKS_ALLOW_PRIVATE is off)",
      ),
    );
  });

  it('asks the system resolver when given none: localhost is loopback', async () => {
    await expect(checkWebhookUrl('https://localhost/x', strict)).rejects.toThrow(
      /^url's localhost resolves to (127\.0\.0\.1: Loopback \(127\.0\.0\.0\/8\)|::1: Loopback Address \(::1\/128\)), not globally reachable;/,
    );
  });
});

/**
 * The lookup a delivery's socket calls (as net.connect calls dns.lookup): what the socket is
 * handed for each answer of the resolver, and each refusal as the socket sees it.
 */
describe('guardedLookup', () => {
  const PUBLIC_V4 = { address: '93.184.216.34', family: 4 };
  const PUBLIC_V6 = { address: '2606:4700::1111', family: 6 };
  /** Resolves one name to what the test gives, or fails as the test says. */
  const resolver =
    (answer: LookupAddress[] | NodeJS.ErrnoException): Lookup =>
    async () => {
      if (answer instanceof Error) throw answer;
      return answer;
    };
  /** What the socket's callback receives. */
  const dial = (allowPrivate: boolean, resolve: Lookup, options: LookupOptions) =>
    new Promise<{ err: NodeJS.ErrnoException | null; address: unknown; family: unknown }>((done) =>
      guardedLookup(allowPrivate, resolve)('hooks.example.com', options, (err, address, family) =>
        done({ err, address, family }),
      ),
    );

  it('hands a socket the first address and its family, or every address when it asks for all', async () => {
    const both = resolver([PUBLIC_V4, PUBLIC_V6]);
    expect(await dial(false, both, {})).toMatchObject({ err: null, address: PUBLIC_V4.address, family: 4 });
    expect(await dial(false, both, { all: true })).toMatchObject({ err: null, address: [PUBLIC_V4, PUBLIC_V6] });
  });

  it.each([
    [4, PUBLIC_V4],
    ['IPv4', PUBLIC_V4],
    [6, PUBLIC_V6],
    ['IPv6', PUBLIC_V6],
  ] as const)('gives a socket that asks for family %s an address of that family', async (family, expected) => {
    const both = resolver([PUBLIC_V4, PUBLIC_V6]);
    const options = { family } as LookupOptions;
    expect(await dial(false, both, options)).toMatchObject({ err: null, address: expected.address });
    expect(await dial(false, both, { ...options, all: true })).toMatchObject({ err: null, address: [expected] });
  });

  it('fails a name with no address of the family asked for as ENOTFOUND', async () => {
    const { err } = await dial(false, resolver([PUBLIC_V4]), { family: 6 });
    expect(err).toMatchObject({ code: 'ENOTFOUND', message: 'hooks.example.com has no address' });
  });

  it('passes the resolver’s own failure on to the socket', async () => {
    const failure = Object.assign(new Error('queryA ESERVFAIL hooks.example.com'), { code: 'ESERVFAIL' });
    const { err } = await dial(false, resolver(failure), {});
    expect(err).toBe(failure);
  });

  it('refuses every answer when one of them is forbidden, naming it, unless private addresses are allowed', async () => {
    const split = resolver([PUBLIC_V4, { address: '10.0.0.5', family: 4 }]);
    for (const options of [{}, { all: true }]) {
      const { err } = await dial(false, split, options);
      expect(err).toBeInstanceOf(WebhookUrlError);
      expect(err).toMatchObject({
        code: 'EWEBHOOKADDRESS',
        message: 'hooks.example.com resolves to 10.0.0.5: Private-Use (10.0.0.0/8), not globally reachable',
      });
    }
    expect(await dial(true, split, { all: true })).toMatchObject({
      err: null,
      address: [PUBLIC_V4, { address: '10.0.0.5', family: 4 }],
    });
  });
});

/**
 * The check on the address each delivery's connection dials (guardedLookup, in the sender's
 * connection pool): a name that passed checkWebhookUrl may resolve elsewhere by the time it is
 * dialled. A receiver on loopback stands for what must not be reached.
 */
describe('a delivery’s connection', () => {
  let server: Server | undefined;
  let hits = 0;
  afterEach(async () => {
    server?.close();
    server = undefined;
    hits = 0;
  });
  async function receiver(): Promise<number> {
    server = createServer((_req, res) => {
      hits++;
      res.end('ok');
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return (server.address() as AddressInfo).port;
  }
  /** Names this test controls: one that now points at loopback. */
  const rebound: Lookup = async (host) => {
    if (host === 'hooks.rebound.test') return [{ address: '127.0.0.1', family: 4 }];
    throw Object.assign(new Error(`${host} unknown`), { code: 'ENOTFOUND' });
  };

  it.each([
    ['a name resolving to loopback through the given resolver', 'hooks.rebound.test', rebound],
    ['localhost through the system resolver', 'localhost', undefined],
  ])('is refused at connect time for %s, and nothing reaches the address', async (_label, host, resolve) => {
    const port = await receiver();
    const sender = new WebhookSender(2_000, false, Date.now, resolve);
    try {
      const result = await sender.send(`http://${host}:${port}/hook`, {}, '{}');
      expect(result.statusCode).toBeNull();
      expect(result.error).toMatch(/^EWEBHOOKADDRESS: \S+ resolves to (127\.0\.0\.1|::1): Loopback/);
      expect(hits).toBe(0);
    } finally {
      await sender.close();
    }
  });

  it('connects to that same name when WEBHOOKS_ALLOW_PRIVATE is on', async () => {
    const port = await receiver();
    const sender = new WebhookSender(2_000, true, Date.now, rebound);
    try {
      const result = await sender.send(`http://hooks.rebound.test:${port}/hook`, {}, '{}');
      expect(result).toMatchObject({ statusCode: 200, error: null });
      expect(hits).toBe(1);
    } finally {
      await sender.close();
    }
  });
});
