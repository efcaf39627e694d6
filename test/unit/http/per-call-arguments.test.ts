import { describe, expect, it } from 'vitest';
import { argumentsList } from '../../../src/http/views/per-call.js';
import { deriveCatalog } from '../../../src/openapi/derive.js';
import type { PerCallRecord } from '../../../src/storage/types.js';

describe('the per-call page lists arguments with their descriptions', () => {
  it('finds a description behind a $defs reference (issue #14)', () => {
    const catalog = deriveCatalog([
      {
        source: 'pets.yaml',
        doc: {
          openapi: '3.0.3',
          info: { title: 'Pets', version: '1' },
          paths: {
            '/pets': {
              post: {
                operationId: 'createPet',
                requestBody: {
                  content: {
                    'application/json': {
                      schema: { type: 'object', properties: { name: { $ref: '#/components/schemas/Name' } } },
                    },
                  },
                },
                responses: { '204': { description: 'done' } },
              },
            },
          },
          components: { schemas: { Name: { type: 'string', description: 'What the pet answers to.' } } },
        },
      },
    ]);
    const capability = catalog.get('create_pet');
    expect(capability?.input?.properties).toEqual({ name: { $ref: '#/$defs/Name' } });
    const html = argumentsList({ arguments: { name: 'Rex' } } as unknown as PerCallRecord, capability);
    expect(html).toContain('What the pet answers to.');
  });
});
