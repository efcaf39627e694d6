/** IP addresses and CIDR ranges as the operator writes them (`10.0.0.0/8`, `fd00::/8`, `192.0.2.1`). */
import { isIP } from 'node:net';

export interface Cidr {
  readonly address: string;
  readonly bits: number;
  readonly family: 'ipv4' | 'ipv6';
}

/** Throws a RangeError naming the entry when it is neither an address nor a range. */
export function parseCidr(entry: string): Cidr {
  const [address = '', prefix, extra] = entry.trim().split('/');
  const version = isIP(address);
  const max = version === 4 ? 32 : 128;
  const bits = prefix === undefined ? max : Number(prefix);
  if (version === 0 || extra !== undefined || !/^\d{1,3}$/.test(String(prefix ?? max)) || bits > max) {
    throw new RangeError(`"${entry}" is not an IP address or CIDR range (e.g. 10.0.0.0/8, fd00::/8)`);
  }
  return { address, bits, family: version === 4 ? 'ipv4' : 'ipv6' };
}
