/**
 * The key a client's budgets are kept under (rate limits, failed authentications and sign-ins,
 * connections per client): an IPv4 address is itself; an IPv6 address stands for its /64. One
 * subscriber is routinely given a whole /64 (RFC 6177) and may use any address in it (RFC 8981
 * temporary addresses), so budgets per IPv6 address would give one client 2^64 of them.
 */
import { isIP } from 'node:net';
import { unmapIpv4 } from './internal-addresses.js';

const IPV6_NETWORK_HEXTETS = 4; // a /64
const IPV6_SITE_HEXTETS = 3; // a /48

/**
 * `2001:db8:a:b:1:2:3:4` → `2001:db8:a:b::/64`; `::ffff:192.0.2.1` → `192.0.2.1`; an IPv4
 * address, or any other text, as it is.
 */
export function clientNetwork(address: string): string {
  const unmapped = unmapIpv4(address);
  if (unmapped !== address) return unmapped;
  const zoneless = address.split('%', 1)[0] as string;
  if (isIP(zoneless) !== 6) return address;
  return `${hextets(zoneless).slice(0, IPV6_NETWORK_HEXTETS).join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address, in lower-case hex without leading zeros. */
function hextets(address: string): string[] {
  const [head = '', tail] = address.split('::');
  const groups = (part: string): string[] =>
    part === '' ? [] : part.split(':').flatMap((g) => (g.includes('.') ? ['0', '0'] : [g])); // a dotted IPv4 tail is 32 bits, past the /64
  const front = groups(head);
  const back = tail === undefined ? [] : groups(tail);
  const zeros = Array.from({ length: 8 - front.length - back.length }, () => '0');
  return [...front, ...zeros, ...back].map((g) => parseInt(g, 16).toString(16));
}

/**
 * The site a client's network belongs to, for the budgets kept beside its own: an IPv6 address
 * stands for its /48, what an end site is routinely given (RFC 6177), and tunnel brokers hand out
 * for free: per /64 alone, one such site has 65,536 clients' budgets. Undefined for IPv4 (an
 * address is the client) and any other text.
 */
export function clientSite(address: string): string | undefined {
  if (unmapIpv4(address) !== address) return undefined;
  const zoneless = address.split('%', 1)[0] as string;
  if (isIP(zoneless) !== 6) return undefined;
  return `${hextets(zoneless).slice(0, IPV6_SITE_HEXTETS).join(':')}::/48`;
}
