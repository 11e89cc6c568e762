import { isIPv4, isIPv6, SocketAddress } from 'node:net';

const MAX_CIDRS = 100;

/** `addr/bits` with the host bits as given; the address family decides the bits' range. */
function parseCidr(text: string): { cidr: string } | { problem: string } {
  const [address = '', bits, extra] = text.split('/');
  const family = isIPv4(address) ? 4 : isIPv6(address) ? 6 : 0;
  const max = family === 4 ? 32 : 128;
  if (family === 0 || extra !== undefined) return { problem: 'is not an IPv4 or IPv6 address or CIDR' };
  if (bits === undefined) return { cidr: `${normalised(address)}/${max}` };
  if (!/^\d{1,3}$/.test(bits) || Number(bits) > max) return { problem: `has a prefix length outside 0–${max}` };
  return { cidr: `${normalised(address)}/${Number(bits)}` };
}

/** One spelling per address (`::FFFF:0:1` and `::ffff:0:1` are one), as Node prints it. */
function normalised(address: string): string {
  return new SocketAddress({ address, family: isIPv4(address) ? 'ipv4' : 'ipv6' }).address;
}

/**
 * Parses a key's allowed client addresses: a list of CIDRs (a bare address is its /32 or /128).
 * Returns them normalised, or the first problem, naming the field as the caller's users write it.
 */
export function parseCidrs(value: unknown, name: string): { cidrs: string[] } | { problem: string } {
  if (!Array.isArray(value))
    return { problem: `${name} must be a list of CIDRs such as 203.0.113.0/24 or 2001:db8::/32` };
  if (value.length > MAX_CIDRS) return { problem: `${name} may hold at most ${MAX_CIDRS} CIDRs` };
  const cidrs: string[] = [];
  for (const entry of value) {
    if (typeof entry !== 'string' || entry.length > 64) return { problem: `${name}: each entry must be a CIDR text` };
    const parsed = parseCidr(entry.trim());
    if ('problem' in parsed) return { problem: `${name}: ${JSON.stringify(entry)} ${parsed.problem}` };
    if (!cidrs.includes(parsed.cidr)) cidrs.push(parsed.cidr);
  }
  return { cidrs };
}
