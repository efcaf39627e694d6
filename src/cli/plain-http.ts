/**
 * The rule for where the admin and agent CLIs send a credential over plain http: to this machine
 * only. The admin token, and the agent's signed JWTs (bearer credentials until they expire), cross
 * any network between here and the proxy readable by whoever is on it; on loopback there is no such
 * network. Another host needs https://, or the operator's explicit --insecure-http.
 */
import { isIPv4 } from 'node:net';
import { UserError } from '../errors.js';

const INSECURE_HTTP_FLAG = '--insecure-http';

/**
 * Refuses `baseUrl` (named by `from`: --url, a variable, a file) when it is plain http to another
 * machine, naming what it would expose (`secret`) and the way out. With `insecure`, returns the
 * warning line to print instead; undefined when there is nothing to warn about.
 */
export function plainHttpWarning(
  baseUrl: string,
  from: string,
  secret: string,
  insecure: boolean,
): string | undefined {
  const url = new URL(baseUrl);
  if (url.protocol !== 'http:' || onThisMachine(url.hostname)) return undefined;
  if (!insecure) {
    throw new UserError(
      `${from}: ${baseUrl} is plain http to a host other than this machine, which would send ${secret} in clear text; use https://, or pass ${INSECURE_HTTP_FLAG} to allow it`,
    );
  }
  return `warning: ${INSECURE_HTTP_FLAG}: sending ${secret} to ${baseUrl} over plain http, readable on the way\n`;
}

/**
 * Whether a URL's hostname (WHATWG-normalized: lower case, IPv4 in dotted decimal, IPv6 in
 * brackets and compressed) is this machine: `localhost`, 127.0.0.0/8 or [::1].
 */
export function onThisMachine(hostname: string): boolean {
  if (hostname === 'localhost' || hostname === '[::1]') return true;
  return isIPv4(hostname) && hostname.startsWith('127.');
}
