/** §2.12 capability versions: a hash of what an approval covers, not of how it is written. */
import { describe, expect, it } from 'vitest';
import { capabilityVersion } from '../../../src/protocol/capability-version.js';
import { canonicalJson } from '../../../src/util/canonical-json.js';
import type { Capability } from '../../../src/openapi/types.js';

function capability(over: {
  input?: object;
  apiId?: string;
  path?: string;
  description?: string;
}): Capability {
  return {
    name: 'get_note',
    description: over.description ?? 'Get a note',
    argumentsSchema: over.input ?? { type: 'object', properties: { id: { type: 'string' } } },
    operation: {
      apiId: over.apiId ?? 'notes',
      method: 'GET',
      path: over.path ?? '/notes/{id}',
      servers: [],
    },
  } as unknown as Capability;
}

describe('capabilityVersion', () => {
  it('ignores key order and the description', () => {
    const a = capability({ input: { type: 'object', properties: { id: { type: 'string' } } } });
    const b = capability({
      input: { properties: { id: { type: 'string' } }, type: 'object' },
      description: 'Another text',
    });
    expect(capabilityVersion(a)).toBe(capabilityVersion(b));
  });

  it('moves with the schema, the path and the upstream API', () => {
    const base = capabilityVersion(capability({}));
    expect(capabilityVersion(capability({ input: { type: 'object' } }))).not.toBe(base);
    expect(capabilityVersion(capability({ path: '/v2/notes/{id}' }))).not.toBe(base);
    expect(capabilityVersion(capability({ apiId: 'other' }))).not.toBe(base);
  });

  it('writes canonical JSON', () => {
    expect(canonicalJson({ b: [1, { d: 1, c: undefined, a: null }], a: 'x' })).toBe(
      '{"a":"x","b":[1,{"a":null,"d":1}]}',
    );
  });
});
