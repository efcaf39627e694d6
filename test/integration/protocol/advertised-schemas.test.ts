/**
 * Issue #14 over HTTP: a capability whose schemas reach more than 256 KiB of components is shown
 * within 256 KiB by describe (§5.2.1) and in grant objects (§5.5, §3.1), its farthest components
 * summarized; execution still checks arguments against the full schema, so a summarized
 * component's rules still hold (§5.11).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADVERTISED_SCHEMA_MAX_CHARS, SUMMARIZED } from '../../../src/openapi/advertised-schemas.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { writeTempSpec } from '../../helpers/proxy.js';

/** A component with `kib` KiB of field descriptions and the given other fields. */
function bulky(title: string, kib: number, fields: Record<string, unknown>): Record<string, unknown> {
  return {
    title,
    description: `The ${title.toLowerCase()}.`,
    type: 'object',
    properties: {
      ...Object.fromEntries(
        Array.from({ length: kib }, (_, i) => [
          `note_${i}`,
          { type: 'string', description: 'n'.repeat(1024) },
        ]),
      ),
      ...fields,
    },
  };
}

const ref = (name: string): { $ref: string } => ({ $ref: `#/components/schemas/${name}` });

// create_order's body reaches Customer (150 KiB) → Profile (150 KiB) → Address: only the first
// fits beside the output, so Profile is summarized and Address, which only Profile refers to, is
// left out of what is shown; Address's zip rule still holds at execute.
const SPEC = {
  openapi: '3.0.3',
  info: { title: 'Orders', version: '1.0.0' },
  paths: {
    '/orders': {
      post: {
        operationId: 'createOrder',
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: { type: 'object', required: ['customer'], properties: { customer: ref('Customer') } },
            },
          },
        },
        responses: {
          '201': { description: 'created', content: { 'application/json': { schema: ref('Receipt') } } },
        },
      },
    },
  },
  components: {
    schemas: {
      Customer: bulky('Customer', 150, { profile: ref('Profile') }),
      Profile: bulky('Profile', 150, { address: ref('Address') }),
      Address: {
        title: 'Address',
        description: 'Where the order goes.',
        type: 'object',
        required: ['zip'],
        properties: { zip: { type: 'string', pattern: '^[0-9]{5}$' } },
      },
      Receipt: { type: 'object', properties: { id: { type: 'string' } } },
    },
  },
};

const POLICY = `capabilities:
  public: ["*"]
`;

let p: TestProtocol;

beforeAll(async () => {
  p = await startProtocol({ policy: POLICY, overrides: { specs: [writeTempSpec(SPEC)] } });
});
afterAll(() => p?.close());

const chars = (schema: unknown): number => (schema === undefined ? 0 : JSON.stringify(schema).length);

function expectAdvertised(view: { input?: unknown; output?: unknown }): void {
  expect(chars(view.input) + chars(view.output)).toBeLessThanOrEqual(ADVERTISED_SCHEMA_MAX_CHARS);
  const defs = (view.input as { $defs: Record<string, { $comment?: string; properties?: unknown }> }).$defs;
  expect(Object.keys(defs).sort()).toEqual(['Customer', 'Profile']);
  expect(defs.Customer?.properties).toBeDefined();
  expect(defs.Profile).toEqual({
    title: 'Profile',
    description: 'The profile.',
    type: 'object',
    $comment: SUMMARIZED,
  });
  // The output is small: shown whole.
  expect(view.output).toMatchObject({
    $ref: '#/$defs/Receipt',
    $defs: { Receipt: { type: 'object', properties: { id: { type: 'string' } } } },
  });
}

describe('a capability larger than 256 KiB', () => {
  it('describe shows it within 256 KiB, the farthest components summarized', async () => {
    const reply = await p.request('GET', '/capability/describe?name=create_order');
    expect(reply.status).toBe(200);
    expectAdvertised(reply.body);
  });

  it('a grant shows the same schemas, and execute still applies a summarized component’s rules', async () => {
    const { host, agent, agentId, body } = await p.activeAgent(['create_order']);
    const grant = body.agent_capability_grants.find(
      (g: { capability: string }) => g.capability === 'create_order',
    );
    expect(grant.status).toBe('active');
    expectAdvertised(grant);
    const status = await p.status(host, agentId);
    expect(status.body.agent_capability_grants[0].input).toEqual(grant.input);

    const refused = await p.execute(agent, agentId, 'create_order', {
      customer: { profile: { address: { zip: 'not-a-zip' } } },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe('invalid_request');
    expect(refused.body.message).toContain('/customer/profile/address/zip');
  });
});
