/**
 * Addresses a document from elsewhere may make the proxy fetch from. A remote document's `$ref`
 * is chosen by whoever wrote the document; fetched, its content becomes part of capabilities
 * agents read. Pointed at the proxy's own network (`https://10.0.0.5/…`, a cloud metadata
 * service, `localhost`), it would carry what only the proxy can reach out to strangers. So such a
 * `$ref` reaches public addresses only (util/internal-addresses.ts, the ranges JWKS URLs may not
 * reach either), checked on the addresses a name resolves to (at connect time, so a name cannot
 * resolve one way when checked and another when used).
 */
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP } from 'node:net';
import { isInternalAddress } from '../util/internal-addresses.js';

export function isPublicAddress(address: string): boolean {
  return isIP(address) !== 0 && !isInternalAddress(address);
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
