/**
 * §2.12 versioned capabilities: a content hash of what an approval covers — the operation's
 * method and path, the input and output schemas and the upstream API. A grant keeps the hash it
 * was approved at; a capability whose hash moved no longer matches what its approver saw (drift.ts).
 *
 * The hash is of the schemas' meaning, not of their layout. Since issue #14 a component sits once
 * under the root's `$defs`; before, it was inlined wherever used (only components on a cycle were
 * `$defs`), and grants in existing databases carry versions of that text. So the schemas are
 * hashed as that inlined canonical text, written straight into the hash (version/schema-text.ts)
 * and equal to what the old build hashed: an upgrade suspends no grant.
 *
 * A document whose components reuse each other without a cycle can inline to text exponential in
 * its size (2^16 copies of a leaf for 16 levels that each use the one below twice). The old build
 * wrote that text as one string, failing past V8's string limit (about 512 MiB) and serving such
 * a capability only at great cost below it. Past INLINED_TEXT_MAX a capability is hashed in the
 * merkle form instead, where a component is written as the hash of its own text: cost grows with
 * the document, not with its expansion. The limit is far above real documents (GitHub's longest
 * capability is 0.4 MiB of text, Stripe's 1 MiB); a grant the old build stamped on a capability
 * past it would be asked for re-approval once, which we accept rather than hash gigabytes.
 */
import { createHash } from 'node:crypto';
import type { Catalog } from '../openapi/catalog.js';
import type { Capability, JsonSchema } from '../openapi/types.js';
import { canonicalJson } from '../util/canonical-json.js';
import { HashSink, LengthSink, TextTooLong } from './version/sinks.js';
import { writeRoot, type SchemaForm, type TextSink } from './version/schema-text.js';

/** Inlined canonical text per capability, in UTF-16 code units, beyond which merkle is used. */
export const INLINED_TEXT_MAX = 32 << 20;

// Catalogs are immutable: a hash is computed once per capability object, off the request path.
const versions = new WeakMap<Capability, string>();

export function capabilityVersion(capability: Capability): string {
  let version = versions.get(capability);
  if (version === undefined) {
    try {
      version = versionIn(capability, 'inlined', INLINED_TEXT_MAX);
    } catch (err) {
      if (!(err instanceof TextTooLong)) throw err;
      // Learn the length of every definition it reaches (linear: lengths are remembered), so
      // other capabilities reaching the same long definitions stop before writing them.
      writeCovered(capability, 'inlined', new LengthSink());
      version = versionIn(capability, 'merkle', Infinity);
    }
    versions.set(capability, version);
  }
  return version;
}

/** The version a grant of `name` approved now is stamped with; null for an unknown capability. */
export function currentVersion(catalog: Catalog, name: string): string | null {
  const capability = catalog.get(name);
  return capability ? capabilityVersion(capability) : null;
}

/** The version in a given form; TextTooLong past `limit` (exported for tests of the forms). */
export function versionIn(capability: Capability, form: SchemaForm, limit: number): string {
  const hash = createHash('sha256');
  const sink = new HashSink(hash, limit);
  writeCovered(capability, form, sink);
  sink.finish();
  return hash.digest('base64url').slice(0, 22);
}

/**
 * canonicalJson({ method, path, input, output, upstream: { api, servers } }) with the schemas
 * written in `form`: the keys in canonical order, as canonicalJson would write them.
 */
function writeCovered(capability: Capability, form: SchemaForm, sink: TextSink): void {
  const { operation } = capability;
  const schema = (root: JsonSchema | undefined): void =>
    root === undefined ? sink.write('null') : writeRoot(root, form, sink);
  sink.write('{"input":');
  schema(capability.argumentsSchema);
  sink.write(`,"method":${JSON.stringify(operation.method)},"output":`);
  schema(capability.output);
  sink.write(`,"path":${JSON.stringify(operation.path)},"upstream":`);
  sink.write(canonicalJson({ api: operation.apiId, servers: operation.servers }));
  sink.write('}');
}
