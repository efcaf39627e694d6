/**
 * §8.12 IP filtering for server-side JWKS fetches: an address is checked after DNS resolution,
 * never the hostname, and internal ones (util/internal-addresses.ts: private, loopback,
 * link-local, unique-local, CGNAT, cloud metadata) are refused unless the operator allow-lists
 * them (`jwks.allowed_cidrs`).
 */
import { BlockList, isIP } from 'node:net';
import { parseCidr } from '../../config/cidr.js';
import { isInternalAddress, unmapIpv4 } from '../../util/internal-addresses.js';

export interface AddressGuard {
  /** Undefined when the address may be fetched; otherwise why not. */
  refusal(address: string): string | undefined;
}

function blockList(ranges: readonly string[]): BlockList {
  const list = new BlockList();
  for (const range of ranges) {
    const cidr = parseCidr(range);
    list.addSubnet(cidr.address, cidr.bits, cidr.family);
  }
  return list;
}

/** Validates the allow-list once (throws RangeError naming a bad entry), then checks per call. */
export function createAddressGuard(allowedCidrs: readonly string[]): AddressGuard {
  const allowed = blockList(allowedCidrs);
  return {
    refusal(raw) {
      const address = unmapIpv4(raw);
      const version = isIP(address);
      if (version === 0) return `"${raw}" is not an IP address`;
      const family = version === 4 ? 'ipv4' : 'ipv6';
      if (allowed.check(address, family)) return undefined;
      if (isInternalAddress(address)) {
        return `${raw} is a private, loopback, link-local or metadata address (§8.12); allow-list it in jwks.allowed_cidrs if intended`;
      }
      return undefined;
    },
  };
}
