/**
 * Addresses a document from elsewhere may make the proxy fetch from. A remote document's `$ref`
 * is chosen by whoever wrote the document; fetched, its content becomes part of capabilities
 * agents read. Pointed at the proxy's own network (`https://10.0.0.5/…`, a cloud metadata
 * service, `localhost`), it would carry what only the proxy can reach out to strangers. So such a
 * `$ref` reaches public addresses only, checked on the addresses a name resolves to (at connect
 * time, so a name cannot resolve one way when checked and another when used).
 */
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { BlockList, isIP } from 'node:net';

const NOT_PUBLIC = new BlockList();
for (const [address, bits] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata services
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['224.0.0.0', 3], // multicast and reserved, up to 255.255.255.255
] as const) {
  NOT_PUBLIC.addSubnet(address, bits, 'ipv4');
}
for (const [address, bits] of [
  ['::', 127], // unspecified and loopback
  ['64:ff9b::', 96], // NAT64 (RFC 6052): reaches an IPv4 address, maybe a private one
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
] as const) {
  NOT_PUBLIC.addSubnet(address, bits, 'ipv6');
}

export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  const mapped = family === 6 ? mappedIpv4(address) : undefined;
  if (mapped !== undefined) return isPublicAddress(mapped);
  // (A BlockList checks an IPv4 address against IPv4-mapped IPv6 rules too, so there are none.)
  return !NOT_PUBLIC.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/** `::ffff:10.0.0.1` or `0:0:0:0:0:ffff:a00:1` → `10.0.0.1`; undefined for any other address. */
function mappedIpv4(address: string): string | undefined {
  // The URL parser writes an IPv6 address in its one canonical form (RFC 5952): `[::ffff:a00:1]`.
  const canonical = new URL(`http://[${address}]`).hostname;
  const m = /^\[::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})\]$/.exec(canonical);
  if (!m) return undefined;
  const high = parseInt(m[1] as string, 16);
  const low = parseInt(m[2] as string, 16);
  return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
}

/** The error a public-only fetch fails with; its message names the address. */
export class NotPublicError extends Error {
  constructor(readonly address: string) {
    super(`it reaches ${address}, which is not a public address`);
  }
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * A `lookup` for http(s).request that resolves as usual and fails when any address the name
 * resolves to is not public (all of them, since the connection may try each in turn).
 */
export function publicOnlyLookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) {
      callback(err, []);
      return;
    }
    const blocked = addresses.find((a) => !isPublicAddress(a.address));
    if (blocked) {
      callback(new NotPublicError(blocked.address), []);
      return;
    }
    if (options.all) callback(null, addresses);
    else {
      const [first] = addresses;
      callback(null, first?.address ?? '', first?.family);
    }
  });
}

/**
 * Whether a remote spec's `$ref` to `ref` may reach public addresses only: yes, unless it is on
 * the spec's own origin and that origin is itself private (the operator's own spec server). A
 * public origin's name could be made to resolve to a private address for the `$ref`'s fetch.
 */
export function refIsPublicOnly(
  root: { readonly url: string; readonly address?: string },
  ref: string,
): boolean {
  const rootIsPrivate = root.address !== undefined && !isPublicAddress(root.address);
  return !(rootIsPrivate && new URL(ref).origin === new URL(root.url).origin);
}
