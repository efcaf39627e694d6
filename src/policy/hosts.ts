/** `hosts`: pre-registered hosts (§2.8), each with its own Ed25519 public key. */
import { parsePublicJwk } from '../protocol/keys.js';
import type { CapabilityClasses } from './capability-lists.js';
import type { Problems } from './problems.js';
import type { PreRegisteredHost } from '../protocol/resolved-policy.js';
import type { PolicyFile } from './types.js';

export function resolveHosts(
  raw: PolicyFile['hosts'],
  grantable: CapabilityClasses['grantable'],
  problems: Problems,
): readonly PreRegisteredHost[] {
  const seenKeys = new Map<string, number>();
  const hosts: PreRegisteredHost[] = [];
  raw.forEach((h, i) => {
    const path = `hosts[${i}]`;
    const defaultCapabilities = grantable(h.default_capabilities, `${path}.default_capabilities`);
    const jwk = parsePublicJwk(h.public_key);
    if (!jwk.ok) {
      problems.add(`${path}.public_key`, jwk.message);
      return;
    }
    const first = seenKeys.get(jwk.jwk.x);
    if (first !== undefined) {
      problems.add(
        `${path}.public_key`,
        `is the same key as hosts[${first}].public_key: each host needs its own key`,
      );
      return;
    }
    seenKeys.set(jwk.jwk.x, i);
    const publicJwk: PreRegisteredHost['publicJwk'] = Object.freeze({
      kty: 'OKP',
      crv: 'Ed25519',
      x: jwk.jwk.x,
    });
    hosts.push(
      Object.freeze({
        ...(h.name !== undefined ? { name: h.name } : {}),
        publicJwk,
        ...(h.user_id !== undefined ? { userId: h.user_id } : {}),
        defaultCapabilities: Object.freeze([...defaultCapabilities]),
      }),
    );
  });
  return Object.freeze(hosts);
}
