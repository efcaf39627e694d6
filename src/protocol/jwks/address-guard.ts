/**
 * §8.12 IP filtering for server-side JWKS fetches: an address is checked after DNS resolution,
 * never the hostname, and private, loopback, link-local, unique-local, CGNAT and cloud metadata
 * ranges are refused unless the operator allow-lists them (`jwks.allowed_cidrs`).
 */
import { BlockList, isIP } from 'node:net';
import { parseCidr } from '../../config/cidr.js';

/** Ranges no JWKS URL may reach by default (§8.12 lists the first ones; the rest are as internal). */
const REFUSED_V4 = [
  '0.0.0.0/8', // "this network": 0.0.0.0 reaches the local host on most stacks
  '10.0.0.0/8',
  '100.64.0.0/10', // CGNAT (RFC 6598)
  '127.0.0.0/8',
  '169.254.0.0/16', // link-local, with the 169.254.169.254 metadata service
  '172.16.0.0/12',
  '192.0.0.0/24', // IETF protocol assignments
  '192.168.0.0/16',
  '198.18.0.0/15', // benchmarking
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved and broadcast
] as const;

const REFUSED_V6 = [
  '::/128', // unspecified
  '::1/128',
  'fc00::/7', // unique-local, with the fd00:ec2::254 metadata service
  'fe80::/10', // link-local
  'ff00::/8', // multicast
  '64:ff9b::/96', // NAT64: embeds an IPv4 address that could be private
  '2002::/16', // 6to4: likewise
] as const;

function blockList(ranges: readonly string[]): BlockList {
  const list = new BlockList();
  for (const range of ranges) {
    const cidr = parseCidr(range);
    list.addSubnet(cidr.address, cidr.bits, cidr.family);
  }
  return list;
}

const refused = blockList([...REFUSED_V4, ...REFUSED_V6]);

/** `::ffff:127.0.0.1` (and its hex spelling) is 127.0.0.1: checked as the IPv4 address it carries. */
export function unmapIpv4(address: string): string {
  const lower = address.toLowerCase();
  const dotted = /^(?:0{0,4}:){5}ffff:(\d+\.\d+\.\d+\.\d+)$|^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (dotted) return dotted[1] ?? dotted[2] ?? address;
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex?.[1] !== undefined && hex[2] !== undefined) {
    const hi = parseInt(hex[1], 16);
    const lo = parseInt(hex[2], 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return address;
}

export interface AddressGuard {
  /** Undefined when the address may be fetched; otherwise why not. */
  refusal(address: string): string | undefined;
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
      if (refused.check(address, family)) {
        return `${raw} is a private, loopback, link-local or metadata address (§8.12); allow-list it in jwks.allowed_cidrs if intended`;
      }
      return undefined;
    },
  };
}
