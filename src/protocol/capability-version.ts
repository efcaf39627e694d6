/**
 * §2.12 versioned capabilities: a content hash of what an approval covers — the operation's
 * method and path, the input and output schemas and the upstream API. A grant keeps the hash it
 * was approved at; a capability whose hash moved no longer matches what its approver saw (drift.ts).
 */
import { createHash } from 'node:crypto';
import type { Capability } from '../openapi/types.js';
import { canonicalJson } from '../util/canonical-json.js';

// Catalogs are immutable: a hash is computed once per capability object, off the request path.
const versions = new WeakMap<Capability, string>();

export function capabilityVersion(capability: Capability): string {
  let version = versions.get(capability);
  if (version === undefined) {
    const covered = {
      method: capability.operation.method,
      path: capability.operation.path,
      input: capability.argumentsSchema,
      output: capability.output ?? null,
      upstream: {
        api: capability.operation.apiId,
        servers: capability.operation.servers,
      },
    };
    version = createHash('sha256').update(canonicalJson(covered)).digest('base64url').slice(0, 22);
    versions.set(capability, version);
  }
  return version;
}
