import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, isIPv4 } from 'node:net';

/** Why an endpoint URL is refused: the admin API answers it with a 400, a delivery fails on it. */
export class WebhookUrlError extends Error {}

export interface UrlRules {
  allowInsecure: boolean;
  allowPrivate: boolean;
}

/**
 * Addresses a webhook may not reach unless WEBHOOKS_ALLOW_PRIVATE=true: the gateway's own
 * machine, its cluster and its cloud's metadata service are all behind them (SSRF).
 */
const RANGES: Array<[string, number, 'ipv4' | 'ipv6', string]> = [
  ['0.0.0.0', 8, 'ipv4', 'unspecified'],
  ['10.0.0.0', 8, 'ipv4', 'private'],
  ['100.64.0.0', 10, 'ipv4', 'shared (carrier-grade NAT)'],
  ['127.0.0.0', 8, 'ipv4', 'loopback'],
  ['169.254.0.0', 16, 'ipv4', 'link-local'],
  ['172.16.0.0', 12, 'ipv4', 'private'],
  ['192.0.0.0', 24, 'ipv4', 'IETF protocol assignments'],
  ['192.168.0.0', 16, 'ipv4', 'private'],
  ['198.18.0.0', 15, 'ipv4', 'benchmarking'],
  ['224.0.0.0', 4, 'ipv4', 'multicast'],
  ['240.0.0.0', 4, 'ipv4', 'reserved'],
  ['::', 128, 'ipv6', 'unspecified'],
  ['::1', 128, 'ipv6', 'loopback'],
  ['fc00::', 7, 'ipv6', 'unique local (private)'],
  ['fe80::', 10, 'ipv6', 'link-local'],
  ['fec0::', 10, 'ipv6', 'site-local'],
  ['ff00::', 8, 'ipv6', 'multicast'],
];

const blocked = RANGES.map(([net, bits, family, reason]) => {
  const list = new BlockList();
  list.addSubnet(net, bits, family);
  return { list, family, reason };
});

/** The IPv4 address an IPv6 one carries (mapped, NAT64, 6to4), which is where it really goes. */
function embeddedIPv4(ip: string): string | undefined {
  const lower = ip.toLowerCase();
  const dotted = /^(?:::ffff:|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (dotted?.[1] && isIPv4(dotted[1])) return dotted[1];
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  const sixToFour = /^2002:([0-9a-f]{1,4}):([0-9a-f]{1,4}):/.exec(lower);
  const pair = hex ?? sixToFour;
  if (!pair?.[1] || !pair[2]) return undefined;
  const hi = Number.parseInt(pair[1], 16);
  const lo = Number.parseInt(pair[2], 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** Why the address is off limits (loopback, private, …), or undefined for a public one. */
export function forbiddenAddress(ip: string): string | undefined {
  const bare = ip.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const v4 = isIPv4(bare) ? bare : embeddedIPv4(bare);
  const [address, family] = v4 ? [v4, 'ipv4' as const] : [bare, 'ipv6' as const];
  if (isIP(address) === 0) return 'not an IP address';
  return blocked.find((b) => b.family === family && b.list.check(address, family))?.reason;
}

type Lookup = (hostname: string) => Promise<LookupAddress[]>;

const systemLookup: Lookup = (hostname) =>
  new Promise((resolve, reject) =>
    dnsLookup(hostname, { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))),
  );

/**
 * Checks an endpoint URL: https (unless insecure is allowed), no credentials, and a host whose
 * every address is public (unless private is allowed). Run when a subscription is made or changed
 * and before each delivery, since what a name resolves to can change; the delivery's connection
 * checks the address it actually dials too (guardedLookup).
 */
export async function checkWebhookUrl(text: string, rules: UrlRules, lookup: Lookup = systemLookup): Promise<URL> {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new WebhookUrlError('url must be an absolute URL such as https://hooks.example.com/animal-store');
  }
  if (url.protocol !== 'https:' && !(rules.allowInsecure && url.protocol === 'http:')) {
    throw new WebhookUrlError(
      rules.allowInsecure ? 'url must be http:// or https://' : 'url must be https:// (WEBHOOKS_ALLOW_INSECURE is off)',
    );
  }
  if (url.username || url.password) throw new WebhookUrlError('url may not carry credentials (user:password@)');
  if (rules.allowPrivate) return url;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  if (isIP(host) !== 0) addresses = [host];
  else {
    try {
      addresses = (await lookup(host)).map((a) => a.address);
    } catch (err) {
      throw new WebhookUrlError(
        `url's host ${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
  }
  for (const address of addresses) {
    const reason = forbiddenAddress(address);
    if (reason) {
      throw new WebhookUrlError(
        `url's host ${host} resolves to a ${reason} address (${address}); endpoints must be public (WEBHOOKS_ALLOW_PRIVATE is off)`,
      );
    }
  }
  return url;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for the delivery's socket that refuses forbidden addresses: the check applies to the
 * address connected to, so a name that changes between the check and the connection gains nothing.
 */
export function guardedLookup(allowPrivate: boolean) {
  return (hostname: string, options: { all?: boolean }, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      const bad = allowPrivate ? undefined : addresses.find((a) => forbiddenAddress(a.address));
      if (bad) {
        const error: NodeJS.ErrnoException = new WebhookUrlError(
          `${hostname} resolves to a ${forbiddenAddress(bad.address)} address (${bad.address})`,
        );
        error.code = 'EWEBHOOKADDRESS';
        return callback(error, []);
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0] as LookupAddress;
      callback(null, first.address, first.family);
    });
  };
}
