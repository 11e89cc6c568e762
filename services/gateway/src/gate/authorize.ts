import { BlockList, isIPv4 } from 'node:net';
import { ApiError } from '@animal-store/common/errors.js';
import type { KeyRecord } from '../keys/key-store.js';
import { type PlanBook, type Scope, scopesFor } from '../plans/plans.js';
import { insufficientScopeChallenge } from './bearer.js';

/** Each key's allowlist, built once per cached record (records are replaced, never changed, on update). */
const allowlists = new WeakMap<KeyRecord, BlockList>();

/** A BlockList of the key's CIDRs (validated when they were set: `keys/cidrs.ts`). */
function allowlistOf(record: KeyRecord, cidrs: readonly string[]): BlockList {
  let list = allowlists.get(record);
  if (!list) {
    list = new BlockList();
    for (const cidr of cidrs) {
      const [net = '', bits] = cidr.split('/');
      const family = isIPv4(net) ? 'ipv4' : 'ipv6';
      // A bare address is its own host, never a /0.
      list.addSubnet(net, bits === undefined ? (family === 'ipv4' ? 32 : 128) : Number(bits), family);
    }
    allowlists.set(record, list);
  }
  return list;
}

/** The client address as a BlockList checks it: an IPv4-mapped IPv6 address is its IPv4 one. */
function clientAddress(ip: string): [string, 'ipv4' | 'ipv6'] {
  if (ip.startsWith('::ffff:') && isIPv4(ip.slice(7))) return [ip.slice(7), 'ipv4'];
  return [ip, isIPv4(ip) ? 'ipv4' : 'ipv6'];
}

/**
 * Why this key may not make this request, or undefined when it may: the route needs a scope the
 * key lacks (403 insufficient_scope), or the key is used from outside its allowed addresses
 * (403 ip_not_allowed). Checked before the limiter takes anything: a forbidden request costs no
 * quota.
 */
export function forbidden(
  record: KeyRecord,
  scope: Scope | undefined,
  ip: string,
  plans: PlanBook,
): ApiError | undefined {
  if (scope !== undefined && !scopesFor(plans, record.plan, record.scopes).includes(scope)) {
    return new ApiError(
      403,
      'insufficient_scope',
      `This API key may not do this: it needs the ${scope} scope`,
      insufficientScopeChallenge(scope),
    );
  }
  const cidrs = record.allowedCidrs;
  if (cidrs && cidrs.length > 0) {
    const [address, family] = clientAddress(ip);
    if (!allowlistOf(record, cidrs).check(address, family)) {
      return new ApiError(403, 'ip_not_allowed', `This API key may not be used from ${address}`);
    }
  }
  return undefined;
}
