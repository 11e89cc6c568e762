import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP } from 'node:net';
import { Address4, Address6 } from 'ip-address';
// The package's copy of the two IANA special-purpose registries, kept by its maintainers and pinned
// to the registries' CSV files by their tests (isGlobal() decides from it). Read here too, to name
// the block that refuses an address and to refuse a block the registry leaves without a yes, which
// isGlobal() lets through.
import { SPECIAL_PURPOSE as IPV4_REGISTRY } from 'ip-address/dist/v4/constants.js';
import { SPECIAL_PURPOSE as IPV6_REGISTRY } from 'ip-address/dist/v6/constants.js';

/** Why an endpoint URL is refused: the admin API answers it with a 400, a delivery fails on it. */
export class WebhookUrlError extends Error {}

export interface UrlRules {
  allowInsecure: boolean;
  allowPrivate: boolean;
}

interface Block<A> {
  subnet: A;
  text: string;
  name: string;
  /** The registry's "Globally Reachable": false, true, or null where it says N/A or nothing. */
  reachable: boolean | null;
}

const blocks = <A extends Address4 | Address6>(
  registry: ReadonlyArray<readonly [string, string, boolean | null]>,
  parse: (cidr: string) => A,
): Array<Block<A>> =>
  registry
    .map(([cidr, name, reachable]) => ({ subnet: parse(cidr), text: cidr, name, reachable }))
    // Most specific first: the first block that holds an address is the one that decides it.
    .sort((a, b) => b.subnet.subnetMask - a.subnet.subnetMask);

const V4_BLOCKS = blocks(IPV4_REGISTRY, (cidr) => new Address4(cidr));
const V6_BLOCKS = blocks(IPV6_REGISTRY, (cidr) => new Address6(cidr));

/** The registry block that decides an address, named, when it does not say "globally reachable". */
function refusingBlock<A extends Address4 | Address6>(address: A, list: Array<Block<A>>): string | undefined {
  const block = list.find((b) => address.isInSubnet(b.subnet));
  return block && block.reachable !== true ? `${block.name} (${block.text})` : undefined;
}

/**
 * Why an IPv4 address may not be dialled, or undefined when it is globally reachable. Both must
 * agree to let it through: the package's isGlobal(), and the most specific registry block holding
 * it saying yes (a block the registry leaves blank, 192.88.99.0/24, has no yes).
 */
function ipv4Refusal(address: Address4): string | undefined {
  const own = refusingBlock(address, V4_BLOCKS) ?? (address.isMulticast() ? 'Multicast (224.0.0.0/4)' : undefined);
  if (own === undefined && address.isGlobal()) return undefined;
  // Stryker disable next-line StringLiteral: unreachable while isGlobal() reads the registry above: an address no block refuses is global.
  return own ?? 'not globally reachable';
}

interface Carried {
  form: string;
  block: string;
  ipv4: Address4;
  /**
   * Whether the IPv4 address alone decides: an IPv4-mapped address is that IPv4 address on a
   * dual-stack socket, and the well-known NAT64 prefix is a translator's way to reach it.
   */
  decides: boolean;
}

/** Where each form keeps the IPv4 address, in bits of the IPv6 one. */
const CARRIERS = [
  { form: 'IPv4-mapped', text: '::ffff:0:0/96', bits: [96, 128], decides: true },
  { form: 'NAT64', text: '64:ff9b::/96', bits: [96, 128], decides: true },
  { form: 'IPv4-translated', text: '::ffff:0:0:0/96', bits: [96, 128], decides: false },
  { form: 'IPv4-compatible', text: '::/96', bits: [96, 128], decides: false },
  { form: '6to4', text: '2002::/16', bits: [16, 48], decides: false },
  { form: 'Teredo', text: '2001::/32', bits: [96, 128], decides: false },
].map((c) => ({ ...c, block: new Address6(c.text), bits: c.bits as [number, number] }));

/**
 * The IPv4 address an IPv6 one carries, and in which form: a packet to it ends up at that IPv4
 * address (through a translator, a relay or a dual stack), so that address must be global too.
 * The local-use NAT64 prefix (64:ff9b:1::/48) carries one where its operator chose: it is refused
 * whatever it carries.
 */
function carriedIPv4(address: Address6): Carried | undefined {
  // :: and ::1 are addresses of their own (unspecified, loopback), not IPv4-compatible ones.
  if (address.getBits(0, 127) === 0n) return undefined;
  const carrier = CARRIERS.find((c) => address.isInSubnet(c.block));
  if (!carrier) return undefined;
  let bits = address.getBits(...carrier.bits);
  // Teredo stores its client's address with every bit inverted.
  if (carrier.form === 'Teredo') bits ^= 0xffffffffn;
  return { form: carrier.form, block: carrier.text, ipv4: Address4.fromBigInt(bits), decides: carrier.decides };
}

const GLOBAL_UNICAST = new Address6('2000::/3');
const OUTSIDE_GLOBAL_UNICAST = 'not global unicast (outside 2000::/3)';

/** Why an IPv6 address of its own (not one carrying an IPv4 address that decides) may not be dialled. */
function ownIPv6Refusal(address: Address6): string | undefined {
  const block = refusingBlock(address, V6_BLOCKS);
  if (block) return block;
  if (address.isMulticast()) return 'Multicast (ff00::/8)';
  // The rest of the space outside global unicast is unassigned or reserved by the IETF.
  if (!address.isInSubnet(GLOBAL_UNICAST)) return OUTSIDE_GLOBAL_UNICAST;
  return undefined;
}

/** Why an IPv6 address may not be dialled, or undefined when it and what it carries are global. */
function ipv6Refusal(address: Address6): string | undefined {
  const carried = carriedIPv4(address);
  const carriedRefusal = carried && ipv4Refusal(carried.ipv4);
  const own = carried?.decides ? undefined : ownIPv6Refusal(address);
  if (own === undefined && carriedRefusal === undefined) {
    // Stryker disable next-line StringLiteral: unreachable while isGlobal() reads the registry above (and an IPv4 it carries, the IPv4 one).
    return address.isGlobal() ? undefined : 'not globally reachable';
  }
  if (!carried) return own;
  // The carrier's block is named once, with what it carries; a refusal of its own comes first.
  const carrier = own?.endsWith(`(${carried.block})`) ? own : `${carried.form} (${carried.block})`;
  // Stryker disable next-line ConditionalExpression,StringLiteral: no registry block lies inside a carrier that does not decide, so today no address has a refusal of its own besides its carrier's block or OUTSIDE_GLOBAL_UNICAST.
  const first = own && own !== carrier && own !== OUTSIDE_GLOBAL_UNICAST ? `${own}; ` : '';
  return `${first}${carrier} carrying ${carried.ipv4.address}${carriedRefusal ? `, ${carriedRefusal}` : ''}`;
}

/**
 * Why an address is off limits, or undefined for one the IANA special-purpose registries (IPv4 and
 * IPv6) mark globally reachable. What they mark not globally reachable, or leave without a yes
 * (Teredo and 6to4 need a relay), is refused: the gateway's own machine, its cluster, its cloud's
 * metadata service and the documentation ranges are all among them (SSRF). An IPv6 address that
 * carries an IPv4 one (mapped, translated, compatible, NAT64, 6to4, Teredo) must carry a global one.
 */
export function forbiddenAddress(ip: string): string | undefined {
  const bare = ip.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 0) return 'not an IP address';
  return family === 4 ? ipv4Refusal(new Address4(bare)) : ipv6Refusal(new Address6(bare));
}

/** Resolves a host name to its addresses, as dns.lookup with `all` does. */
export type Lookup = (hostname: string) => Promise<LookupAddress[]>;

const systemLookup: Lookup = (hostname) =>
  new Promise((resolve, reject) =>
    dnsLookup(hostname, { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))),
  );

function refusal(host: string, address: string, reason: string): string {
  const unreachable = 'not globally reachable';
  return `${host} resolves to ${address}: ${reason === unreachable ? reason : `${reason}, ${unreachable}`}`;
}

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
  // Stryker disable next-line Regex: a URL's hostname holds brackets only around an IPv6 address, at its ends.
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
        `url's ${refusal(host, address, reason)}; endpoints must be public (WEBHOOKS_ALLOW_PRIVATE is off)`,
      );
    }
  }
  return url;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for the delivery's socket that refuses forbidden addresses: the check applies to the
 * address connected to, so a name that changes between the check and the connection gains nothing.
 * `resolve` replaces the system resolver (dns.lookup with the socket's options) where a caller
 * needs names of its own.
 */
export function guardedLookup(allowPrivate: boolean, resolve?: Lookup) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    const answered = (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => {
      // Stryker disable next-line ArrayDeclaration: a socket's lookup reads no address from a failed lookup.
      if (err) return callback(err, []);
      const bad = allowPrivate ? undefined : addresses.find((a) => forbiddenAddress(a.address));
      if (bad) {
        const error: NodeJS.ErrnoException = new WebhookUrlError(
          refusal(hostname, bad.address, forbiddenAddress(bad.address) as string),
        );
        error.code = 'EWEBHOOKADDRESS';
        // Stryker disable next-line ArrayDeclaration: a socket's lookup reads no address from a failed lookup.
        return callback(error, []);
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0];
      // Stryker disable next-line ArrayDeclaration: a socket's lookup reads no address from a failed lookup.
      if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), []);
      callback(null, first.address, first.family);
    };
    if (!resolve) {
      dnsLookup(hostname, { ...options, all: true }, answered);
      return;
    }
    const family = { 4: 4, IPv4: 4, 6: 6, IPv6: 6 }[options.family ?? 0];
    resolve(hostname).then(
      (addresses) => answered(null, family ? addresses.filter((a) => a.family === family) : addresses),
      // Stryker disable next-line ArrayDeclaration: answered() reads no addresses with an error.
      (err: NodeJS.ErrnoException) => answered(err, []),
    );
  };
}
