/**
 * Generates a large, valid OpenAPI 3.0 document: `resources` resources with list/create/get/
 * update/delete operations each, sharing component schemas. Used by tests (pagination over a big
 * catalog) and by the large-spec benchmark.
 */
export function syntheticSpec(resources: number, fieldsPerSchema = 12): Record<string, unknown> {
  const paths: Record<string, unknown> = {};
  const schemas: Record<string, unknown> = {};
  for (let r = 0; r < resources; r++) {
    const name = `Resource${r}`;
    const properties: Record<string, unknown> = { id: { type: 'string', format: 'uuid', readOnly: true } };
    for (let f = 0; f < fieldsPerSchema; f++) {
      properties[`field_${f}`] =
        f % 3 === 0
          ? { type: 'integer', minimum: 0, description: `Numeric field ${f} of ${name}, counted in units.` }
          : f % 3 === 1
            ? { type: 'string', maxLength: 200, nullable: true, description: `Text field ${f} of ${name}.` }
            : { $ref: '#/components/schemas/Money' };
    }
    schemas[name] = { type: 'object', required: ['field_0'], properties, description: `A ${name} record.` };
    const ref = { $ref: `#/components/schemas/${name}` };
    const json = (schema: unknown): unknown => ({ 'application/json': { schema } });
    paths[`/resources${r}`] = {
      get: {
        operationId: `list${name}s`,
        summary: `List ${name} records`,
        tags: [`group${r % 10}`],
        parameters: [
          { name: 'page', in: 'query', schema: { type: 'integer', minimum: 1 } },
          { name: 'per_page', in: 'query', schema: { type: 'integer', maximum: 100 } },
        ],
        responses: { '200': { description: 'ok', content: json({ type: 'array', items: ref }) } },
      },
      post: {
        operationId: `create${name}`,
        summary: `Create a ${name}`,
        requestBody: { required: true, content: json(ref) },
        responses: { '201': { description: 'created', content: json(ref) } },
      },
    };
    paths[`/resources${r}/{id}`] = {
      parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
      get: {
        operationId: `get${name}`,
        summary: `Get a ${name}`,
        responses: { '200': { description: 'ok', content: json(ref) } },
      },
      put: {
        operationId: `update${name}`,
        requestBody: { content: json(ref) },
        responses: { '200': { description: 'ok', content: json(ref) } },
      },
      delete: { operationId: `delete${name}`, responses: { '204': { description: 'deleted' } } },
    };
  }
  schemas.Money = {
    type: 'object',
    required: ['amount', 'currency'],
    properties: {
      amount: { type: 'number', minimum: 0, exclusiveMinimum: true },
      currency: { type: 'string', pattern: '^[A-Z]{3}$' },
    },
  };
  return {
    openapi: '3.0.3',
    info: { title: 'Synthetic', version: '1.0.0', description: 'Generated for tests and benchmarks.' },
    servers: [{ url: 'https://synthetic.example.com' }],
    paths,
    components: { schemas },
  };
}
