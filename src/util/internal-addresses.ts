/**
 * Addresses inside a network rather than on the internet: private, loopback, link-local,
 * unique-local, CGNAT, cloud metadata, multicast and reserved ranges, and the IPv6 spellings that
 * reach an IPv4 one (mapped, NAT64, 6to4). A URL a stranger chose must not reach them from here
 * (§8.12): JWKS URLs (protocol/jwks/address-guard.ts) and a remote OpenAPI document's `$ref`s
 * (openapi/public-address.ts).
 */
import { BlockList, isIP } from 'node:net';

/** The internal ranges (§8.12 lists the first ones; the rest are as internal). */
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

/** The ranges above (well-formed constants) as a BlockList. */
function rangeList(ranges: readonly string[]): BlockList {
  const list = new BlockList();
  for (const range of ranges) {
    const [address = '', bits = ''] = range.split('/');
    list.addSubnet(address, Number(bits), isIP(address) === 4 ? 'ipv4' : 'ipv6');
  }
  return list;
}

const refused = rangeList([...REFUSED_V4, ...REFUSED_V6]);

/** `::ffff:127.0.0.1` (and its hex spelling) is 127.0.0.1: checked as the IPv4 address it carries. */
export function unmapIpv4(address: string): string {
  if (isIP(address) !== 6) return address;
  // The URL parser writes an IPv6 address in its one canonical form (RFC 5952): every spelling of
  // a mapped address becomes `[::ffff:a00:1]`.
  let canonical: string;
  try {
    canonical = new URL(`http://[${address}]`).hostname;
  } catch {
    return address; // with a zone index (fe80::1%eth0): link-local, not a mapped address
  }
  const hex = /^\[::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})\]$/.exec(canonical);
  if (hex?.[1] === undefined || hex[2] === undefined) return address;
  const hi = parseInt(hex[1], 16);
  const lo = parseInt(hex[2], 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** Whether `address` (an IP address, IPv4-mapped or not) is in one of the internal ranges. */
export function isInternalAddress(address: string): boolean {
  const unmapped = unmapIpv4(address);
  const version = isIP(unmapped);
  return version !== 0 && refused.check(unmapped, version === 4 ? 'ipv4' : 'ipv6');
}
