/** §5.1 Discovery: `GET /.well-known/agent-configuration`. */
import { DPOP_ALGORITHMS } from '../../protocol/dpop.js';
import { sendJson } from '../respond.js';
import { step } from '../pipeline.js';
import type { Router } from '../router.js';

export const PROTOCOL_VERSION = '1.0-draft';

/** Endpoint paths, relative to the issuer (§5.1). */
export const ENDPOINTS = {
  register: '/agent/register',
  capabilities: '/capability/list',
  describe_capability: '/capability/describe',
  execute: '/capability/execute',
  request_capability: '/agent/request-capability',
  status: '/agent/status',
  reactivate: '/agent/reactivate',
  revoke: '/agent/revoke',
  revoke_host: '/host/revoke',
  rotate_key: '/agent/rotate-key',
  rotate_host_key: '/host/rotate-key',
  introspect: '/agent/introspect',
} as const;

export interface DiscoveryOptions {
  /** Read per request: with `--port 0` the issuer is known only once the server listens. */
  readonly issuer: () => string;
  readonly providerName: string;
  readonly description: string;
  /** Read per request from the policy in force: a reload may change them. */
  readonly modes: () => readonly string[];
  readonly approvalMethods: () => readonly string[];
}

export function discoveryRoutes(router: Router, options: DiscoveryOptions): void {
  router.add('GET', '/.well-known/agent-configuration', [
    step('configuration', ({ res }) => {
      const issuer = options.issuer();
      sendJson(
        res,
        200,
        {
          version: PROTOCOL_VERSION,
          provider_name: options.providerName,
          description: options.description,
          issuer,
          default_location: `${issuer}${ENDPOINTS.execute}`,
          algorithms: ['Ed25519'],
          modes: options.modes(),
          approval_methods: options.approvalMethods(),
          endpoints: ENDPOINTS,
          // §10.10: extension profiles are used only when the server documents them; this one
          // puts a notification_url (SSE) in every approval object (§10.10.2).
          extension_profiles: ['real-time-approval-notification'],
          // §4.4: DPoP-bound JWTs are accepted on every endpoint (RFC 9449 §5.1 names this member).
          dpop_signing_alg_values_supported: DPOP_ALGORITHMS,
        },
        // §5.1: a max-age of one hour is RECOMMENDED.
        { 'cache-control': 'public, max-age=3600' },
      );
    }),
  ]);
}
