/**
 * The client's address behind load balancers (`server.trusted_proxies`). `Forwarded` (RFC 7239)
 * and `X-Forwarded-For` are written by whoever sent the request, so they are read only when the
 * socket's peer is a trusted proxy, and then from the right: each hop appends the address it
 * saw, so the first address from the right that is not itself a trusted proxy is the client.
 * Anything left of it was written by the client and is never believed. Only the header the
 * balancers write (`server.forwarded_header`) is read: they pass the other through as the client
 * sent it, so reading it would let the client name its own address.
 */
import { BlockList, isIP } from 'node:net';
import type { IncomingMessage } from 'node:http';
import { parseCidr } from '../config/cidr.js';
import type { ForwardedHeader } from '../config/settings.js';
import { unmapIpv4 } from '../util/internal-addresses.js';

export class ClientAddress {
  readonly #trusted = new BlockList();
  readonly #any: boolean;

  readonly #header: ForwardedHeader;

  /** `cidrs`: addresses or CIDR ranges, IPv4 or IPv6; a bad entry throws with its text. */
  constructor(cidrs: readonly string[], header: ForwardedHeader = 'x-forwarded-for') {
    for (const entry of cidrs) addTrusted(this.#trusted, entry);
    this.#any = cidrs.length > 0;
    this.#header = header;
  }

  /** The peer itself, or (behind a trusted proxy) the client the proxies saw. */
  of(req: IncomingMessage): string {
    const peer = normalize(req.socket.remoteAddress ?? '') ?? 'unknown';
    if (!this.#any || !this.isTrusted(peer)) return peer;
    const hops = this.#header === 'forwarded' ? forwardedHops(req) : xForwardedForHops(req);
    let client = peer;
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = normalize(hops[i] ?? '');
      // An address a proxy could not have written ends the walk: the last good one is the client.
      if (hop === undefined) return client;
      client = hop;
      if (!this.isTrusted(hop)) return hop;
    }
    return client;
  }

  isTrusted(address: string): boolean {
    const family = isIP(address);
    if (family === 0) return false;
    return this.#trusted.check(address, family === 4 ? 'ipv4' : 'ipv6');
  }
}

function addTrusted(list: BlockList, entry: string): void {
  const { address, bits, family } = parseCidr(entry);
  list.addSubnet(address, bits, family);
}

/**
 * The addresses the proxies recorded in `Forwarded`'s `for=`, oldest first. Repeated header lines
 * arrive joined by commas.
 */
function forwardedHops(req: IncomingMessage): string[] {
  const forwarded = req.headers.forwarded;
  if (typeof forwarded !== 'string' || forwarded === '') return [];
  const hops: string[] = [];
  for (const element of forwarded.split(',')) {
    const pair = element
      .split(';')
      .map((p) => p.trim())
      .find((p) => p.toLowerCase().startsWith('for='));
    // An element without for= is a hop that did not say; it cannot be believed past.
    hops.push(pair === undefined ? '' : unquote(pair.slice(4)));
  }
  return hops;
}

/** The addresses the proxies recorded in `X-Forwarded-For`, oldest first. */
function xForwardedForHops(req: IncomingMessage): string[] {
  const xff = req.headers['x-forwarded-for'];
  if (typeof xff !== 'string' || xff === '') return [];
  return xff.split(',').map((s) => s.trim());
}

/** `"[2001:db8::1]:4711"` → `2001:db8::1`, `192.0.2.1:80` → `192.0.2.1` (RFC 7239 §6). */
function unquote(value: string): string {
  let v = value.trim();
  if (v.startsWith('"') && v.endsWith('"')) v = v.slice(1, -1);
  if (v.startsWith('[')) {
    const end = v.indexOf(']');
    return end > 0 ? v.slice(1, end) : '';
  }
  const colon = v.indexOf(':');
  return colon > 0 && v.indexOf(':', colon + 1) === -1 ? v.slice(0, colon) : v;
}

/** A literal IP address, IPv4-mapped IPv6 shown as IPv4; undefined for anything else. */
export function normalize(address: string): string | undefined {
  const a = unmapIpv4(address);
  return isIP(a) === 0 ? undefined : a;
}
