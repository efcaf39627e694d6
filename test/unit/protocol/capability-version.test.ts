/** §2.12 capability versions: a hash of what an approval covers, not of how it is written. */
import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { capabilityVersion, INLINED_TEXT_MAX, versionIn } from '../../../src/protocol/capability-version.js';
import { TextTooLong } from '../../../src/protocol/version/sinks.js';
import { canonicalJson } from '../../../src/util/canonical-json.js';
import type { Capability } from '../../../src/openapi/types.js';

function capability(over: {
  input?: object;
  output?: object;
  apiId?: string;
  path?: string;
  description?: string;
}): Capability {
  return {
    name: 'get_note',
    description: over.description ?? 'Get a note',
    argumentsSchema: over.input ?? { type: 'object', properties: { id: { type: 'string' } } },
    ...(over.output ? { output: over.output } : {}),
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

  it('hashes a schema without components as its canonical JSON, as it always did', () => {
    const input = { type: 'object', properties: { id: { type: 'string', enum: ['a', 'b'] } } };
    const covered = {
      method: 'GET',
      path: '/notes/{id}',
      input,
      output: null,
      upstream: { api: 'notes', servers: [] },
    };
    const expected = createHash('sha256').update(canonicalJson(covered)).digest('base64url').slice(0, 22);
    expect(capabilityVersion(capability({ input }))).toBe(expected);
  });

  it('hashes a component where it is used: the version does not see the $defs layout', () => {
    const inlined = {
      type: 'object',
      properties: { tag: { type: 'string', description: 'beside', maxLength: 3 } },
    };
    const referenced = {
      type: 'object',
      properties: { tag: { $ref: '#/$defs/Tag', description: 'beside' } },
      $defs: { Tag: { type: 'string', description: 'own', maxLength: 3 } },
    };
    expect(capabilityVersion(capability({ input: referenced }))).toBe(
      capabilityVersion(capability({ input: inlined })),
    );
  });
});

/** Pet → Tag (off any cycle) and Node ↔ Node (a cycle) → Tag, in the layout of issue #14. */
function petSchema(over: { tag?: object; node?: object; tagName?: string } = {}): object {
  const tagName = over.tagName ?? 'Tag';
  return {
    type: 'object',
    properties: { pet: { $ref: '#/$defs/Pet' }, tree: { $ref: '#/$defs/Node' } },
    $defs: {
      Pet: {
        type: 'object',
        properties: { tag: { $ref: `#/$defs/${tagName}`, description: 'The tag' } },
      },
      [tagName]: over.tag ?? { type: 'string', maxLength: 8 },
      Node: over.node ?? {
        type: 'object',
        properties: {
          value: { type: 'string' },
          children: { type: 'array', items: { $ref: '#/$defs/Node' } },
          tag: { $ref: `#/$defs/${tagName}` },
        },
      },
    },
  };
}

describe('the merkle form (capabilities whose inlined text is too long)', () => {
  const merkle = (input: object): string => versionIn(capability({ input }), 'merkle', Infinity);

  it('is stable, and does not depend on the names of components off a cycle', () => {
    const shared = petSchema();
    const inlined = capabilityVersion(capability({ input: shared }));
    expect(merkle(shared)).toBe(merkle(petSchema()));
    // Neither form takes the other's remembered text of the shared components.
    expect(versionIn(capability({ input: shared }), 'inlined', INLINED_TEXT_MAX)).toBe(inlined);
    expect(merkle(petSchema({ tagName: 'Label' }))).toBe(merkle(petSchema()));
    expect(merkle(petSchema())).not.toBe(capabilityVersion(capability({ input: petSchema() })));
  });

  it("moves when a component's content changes, however deep", () => {
    const base = merkle(petSchema());
    expect(merkle(petSchema({ tag: { type: 'string', maxLength: 9 } }))).not.toBe(base);
    const node = {
      type: 'object',
      properties: {
        value: { type: 'integer' },
        children: { type: 'array', items: { $ref: '#/$defs/Node' } },
      },
    };
    expect(merkle(petSchema({ node }))).not.toBe(base);
  });

  it('is what a capability past the inlined-text limit is versioned with, without running out', () => {
    // Each level refers to the one below twice: 2^16 copies of a 1 KiB leaf when inlined.
    const $defs: Record<string, object> = { L0: { type: 'string', description: 'x'.repeat(1024) } };
    for (let i = 1; i <= 16; i++) {
      $defs[`L${i}`] = {
        type: 'object',
        properties: { a: { $ref: `#/$defs/L${i - 1}` }, b: { $ref: `#/$defs/L${i - 1}` } },
      };
    }
    const input = { type: 'object', properties: { top: { $ref: '#/$defs/L16' } }, $defs };
    expect(() => versionIn(capability({ input }), 'inlined', INLINED_TEXT_MAX)).toThrow(TextTooLong);
    expect(capabilityVersion(capability({ input }))).toBe(merkle(input));
    // Another capability over the same (shared) components stops at once and is versioned too.
    const output = { $ref: '#/$defs/L16', $defs };
    expect(capabilityVersion(capability({ input, output }))).toBe(
      versionIn(capability({ input, output }), 'merkle', Infinity),
    );
  });
});
