import { describe, expect, it } from 'vitest';
import { checkWebhookUrl, forbiddenAddress, WebhookUrlError } from '../src/webhooks/address-guard.js';

/** The SSRF rules for webhook endpoints, as tables: each address, then each URL and what it resolves to. */

const FORBIDDEN: Array<[string, string]> = [
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['0.0.0.0', 'unspecified'],
  ['10.0.0.1', 'private'],
  ['172.16.0.1', 'private'],
  ['172.31.255.255', 'private'],
  ['192.168.1.1', 'private'],
  ['100.64.0.1', 'shared (carrier-grade NAT)'],
  ['169.254.169.254', 'link-local'],
  ['192.0.0.8', 'IETF protocol assignments'],
  ['198.18.0.1', 'benchmarking'],
  ['224.0.0.1', 'multicast'],
  ['255.255.255.255', 'reserved'],
  ['::1', 'loopback'],
  ['::', 'unspecified'],
  ['fc00::1', 'unique local (private)'],
  ['fd12:3456::1', 'unique local (private)'],
  ['fe80::1', 'link-local'],
  ['fe80::1%eth0', 'link-local'],
  ['ff02::1', 'multicast'],
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:7f00:1', 'loopback'],
  ['::ffff:10.1.2.3', 'private'],
  ['64:ff9b::a9fe:a9fe', 'link-local'],
  ['2002:c0a8:0101::1', 'private'],
  ['[::1]', 'loopback'],
];

const PUBLIC = [
  '8.8.8.8',
  '1.1.1.1',
  '172.32.0.1',
  '100.128.0.1',
  '93.184.216.34',
  '2606:4700::1111',
  '::ffff:8.8.8.8',
];

describe('forbiddenAddress', () => {
  it.each(FORBIDDEN)('refuses %s (%s)', (address, reason) => {
    expect(forbiddenAddress(address)).toBe(reason);
  });
  it.each(PUBLIC)('allows %s', (address) => {
    expect(forbiddenAddress(address)).toBeUndefined();
  });
});

const strict = { allowInsecure: false, allowPrivate: false };
/** DNS as a table: each name and what it resolves to. */
const dns: Record<string, string[]> = {
  'hooks.example.com': ['93.184.216.34'],
  'internal.example.com': ['10.0.0.5'],
  // One public and one private answer: the private one is where a request could go.
  'split.example.com': ['93.184.216.34', '192.168.0.10'],
  'v6only.example.com': ['::1'],
};
const lookup = async (host: string) => {
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
  ['https://internal.example.com/x', strict, 'private address (10.0.0.5)'],
  ['https://split.example.com/x', strict, 'private address (192.168.0.10)'],
  ['https://v6only.example.com/x', strict, 'loopback address (::1)'],
  ['https://nowhere.example.com/x', strict, 'does not resolve (ENOTFOUND)'],
  ['https://[::ffff:169.254.169.254]/', strict, 'link-local'],
  ['https://2130706433/', strict, 'loopback'],
  ['https://0x7f.1/', strict, 'loopback'],
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
});
