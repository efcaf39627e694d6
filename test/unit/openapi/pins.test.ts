import { describe, expect, it } from 'vitest';
import { createSchemaValidator } from '../../../src/openapi/ajv.js';
import { matchesQuery, type Catalog } from '../../../src/openapi/catalog.js';
import { deriveCatalog } from '../../../src/openapi/derive.js';
import { PinError, pinArguments } from '../../../src/openapi/pins.js';
import type { Capability } from '../../../src/openapi/types.js';

// Operator-pinned arguments (`operations.{name}.pin`): hidden from the advertised input (§5.2.1)
// and from the schema execution validates against, so an agent can neither see nor set them.

const tenantParam = { name: 'tenant', in: 'path', required: true, schema: { type: 'string' } };
const OK = { '200': { description: 'ok' } };

const doc = {
  openapi: '3.0.3',
  info: { title: 'Notes', version: '1.0.0' },
  paths: {
    '/tenants/{tenant}/notes': {
      post: {
        operationId: 'createNote',
        summary: 'Create a note',
        parameters: [tenantParam, { name: 'dryRun', in: 'query', schema: { type: 'boolean' } }],
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['text'],
                properties: { text: { type: 'string' }, owner: { type: 'string' } },
              },
            },
          },
        },
        responses: OK,
      },
      get: { operationId: 'listNotes', summary: 'List notes', parameters: [tenantParam], responses: OK },
    },
    '/health': { get: { operationId: 'zHealth', summary: 'Health check', responses: OK } },
  },
};

function catalog(): Catalog {
  return deriveCatalog([{ source: 'notes.yaml', doc }]);
}

function cap(c: Catalog, name: string): Capability {
  const found = c.get(name);
  if (!found) throw new Error(`no capability ${name}`);
  return found;
}

function pinError(fn: () => unknown): PinError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(PinError);
    return err as PinError;
  }
  throw new Error('expected a PinError');
}

describe('pinArguments', () => {
  it('returns the catalog itself when nothing is pinned', () => {
    const original = catalog();
    expect(pinArguments(original, new Map())).toBe(original);
  });

  it('removes a pinned argument from input and argumentsSchema, properties and required', () => {
    const pinned = cap(
      pinArguments(catalog(), new Map([['create_note', ['tenant', 'owner']]])),
      'create_note',
    );
    for (const schema of [pinned.input, pinned.argumentsSchema]) {
      expect(Object.keys(schema?.properties as object)).toEqual(['dryRun', 'text']);
      expect(schema?.required).toEqual(['text']);
      expect(schema?.additionalProperties).toBe(false);
    }
  });

  it('drops `required` when only pinned arguments were required', () => {
    const pinned = cap(
      pinArguments(catalog(), new Map([['create_note', ['tenant', 'text']]])),
      'create_note',
    );
    expect(pinned.argumentsSchema).not.toHaveProperty('required');
    expect(pinned.input).not.toHaveProperty('required');
  });

  it('makes execution reject a pinned argument sent by the agent', () => {
    const pinned = cap(pinArguments(catalog(), new Map([['create_note', ['tenant']]])), 'create_note');
    const validate = createSchemaValidator().compile(pinned.argumentsSchema);
    expect(validate({ text: 'hi' })).toBe(true);
    expect(validate({ text: 'hi', tenant: 'someone-else' })).toBe(false);
  });

  it('removes input entirely when nothing is left for the agent to supply (§5.2.1)', () => {
    const pinned = cap(pinArguments(catalog(), new Map([['list_notes', ['tenant']]])), 'list_notes');
    expect(pinned).not.toHaveProperty('input');
    expect(pinned.argumentsSchema.properties).toEqual({});
    expect(pinned.argumentsSchema).not.toHaveProperty('required');
    const validate = createSchemaValidator().compile(pinned.argumentsSchema);
    expect(validate({})).toBe(true);
    expect(validate({ tenant: 't' })).toBe(false);
  });

  it('keeps the operation binding, so the executor still knows where the pinned value goes', () => {
    const original = catalog();
    const pinned = cap(pinArguments(original, new Map([['list_notes', ['tenant']]])), 'list_notes');
    expect(pinned.operation).toBe(cap(original, 'list_notes').operation);
  });

  it('leaves other capabilities untouched', () => {
    const original = catalog();
    const pinned = pinArguments(original, new Map([['list_notes', ['tenant']]]));
    expect(cap(pinned, 'create_note')).toBe(cap(original, 'create_note'));
    expect(cap(pinned, 'z_health')).toBe(cap(original, 'z_health'));
  });

  it('refuses an unknown capability, naming it', () => {
    const err = pinError(() => pinArguments(catalog(), new Map([['delete_note', ['tenant']]])));
    expect(err.message).toContain('delete_note');
  });

  it('refuses an argument the capability does not have, naming both', () => {
    const err = pinError(() => pinArguments(catalog(), new Map([['create_note', ['text', 'author']]])));
    expect(err.message).toContain('create_note');
    expect(err.message).toContain('author');
  });

  it('refuses to pin an argument of a capability that takes none', () => {
    const err = pinError(() => pinArguments(catalog(), new Map([['z_health', ['tenant']]])));
    expect(err.message).toContain('z_health');
    expect(err.message).toContain('tenant');
  });

  it('keeps the catalog sorted, searchable and its APIs and warnings', () => {
    const original = catalog();
    const pinned = pinArguments(original, new Map([['list_notes', ['tenant']]]));
    expect(pinned.capabilities.map((c) => c.name)).toEqual(['create_note', 'list_notes', 'z_health']);
    expect(pinned.capabilities.filter((c) => matchesQuery(c, 'list notes')).map((c) => c.name)).toEqual([
      'list_notes',
    ]);
    expect(pinned.api('notes')?.title).toBe('Notes');
    expect(pinned.apis).toEqual(original.apis);
    expect(pinned.warnings).toEqual(original.warnings);
  });
});
