/**
 * A document's regular expressions through a running proxy (util/linear-regexp.ts): `pattern`
 * and `format: url` are still enforced before anything is sent (§5.11), on RE2, in validators
 * compiled on the event loop and off it; a pattern RE2 cannot run (lookaround) is shown to agents
 * and left to the upstream. Linear time itself is shown by test/unit/openapi/linear-patterns.test.ts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { OFF_THREAD_MIN_CHARS } from '../../../src/protocol/argument-validators.js';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import type { TestProtocol } from '../../helpers/protocol.js';
import { writeTempSpec } from '../../helpers/proxy.js';

type Agent = Awaited<ReturnType<TestProtocol['activeAgent']>>;

const OK = {
  '200': { description: 'ok', content: { 'application/json': { schema: { type: 'object' } } } },
};
const NESTED_QUANTIFIER = '^(a+)+$';
const LOOKAHEAD = '^(?=.*\\d).{8,}$';

/** A JSON body with `code` (pattern) and `link` (url), padded past OFF_THREAD_MIN_CHARS when `large`. */
function bodyOperation(operationId: string, large: boolean): unknown {
  const properties: Record<string, unknown> = {
    code: { type: 'string', pattern: NESTED_QUANTIFIER },
    link: { type: 'string', format: 'url' },
  };
  if (large) {
    for (let i = 0; i < 300; i++)
      properties[`note_${i}`] = { type: 'string', description: 'Long text. '.repeat(25) };
  }
  return {
    post: {
      operationId,
      requestBody: {
        required: true,
        content: { 'application/json': { schema: { type: 'object', properties } } },
      },
      responses: OK,
    },
  };
}

const SPEC = {
  openapi: '3.0.3',
  info: { title: 'Patterns', version: '1' },
  paths: {
    '/small': bodyOperation('small', false),
    '/large': bodyOperation('large', true),
    '/accounts': {
      get: {
        operationId: 'accounts',
        parameters: [{ name: 'password', in: 'query', schema: { type: 'string', pattern: LOOKAHEAD } }],
        responses: OK,
      },
    },
  },
};

let gw: Gateway;
let agent: Agent;
beforeAll(async () => {
  gw = await startGateway({ spec: writeTempSpec(SPEC) });
  agent = await gw.p.activeAgent(['small', 'large', 'accounts']);
});
afterAll(() => gw.close());
afterEach(() => {
  gw.upstream.requests.length = 0;
});

const exec = (capability: string, args: Record<string, unknown>) =>
  gw.p.execute(agent.agent, agent.agentId, capability, args);

describe.each(['small', 'large'])('the %s body schema', (capability) => {
  it(capability === 'large' ? 'is compiled off the event loop' : 'is compiled on the event loop', () => {
    const size = JSON.stringify(gw.p.proxy.catalog.get(capability)?.argumentsSchema).length;
    expect(size >= OFF_THREAD_MIN_CHARS).toBe(capability === 'large');
  });

  it('refuses a string that fails `pattern` or `format: url`, naming it, and sends nothing', async () => {
    // Short enough that a backtracking build would still answer (in about a second), not hang.
    const reply = await exec(capability, {
      code: 'a'.repeat(24) + '!',
      link: 'http://' + ':'.repeat(5_000) + '@',
    });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('invalid_request');
    expect(reply.body.errors.map((e: { path: string }) => e.path).sort()).toEqual(['/code', '/link']);
    expect(gw.upstream.requests).toHaveLength(0);
  });

  it('sends strings that match', async () => {
    const reply = await exec(capability, { code: 'aaaa', link: 'https://example.com/x' });
    expect(reply.status).toBe(200);
    expect(gw.upstream.requests).toHaveLength(1);
  });
});

describe('a pattern RE2 cannot run (lookaround)', () => {
  it('is shown to agents as the document wrote it', () => {
    const schema = gw.p.proxy.catalog.get('accounts')?.argumentsSchema as {
      properties: { password: { pattern: string } };
    };
    expect(schema.properties.password.pattern).toBe(LOOKAHEAD);
  });

  it('is left to the upstream: a value it would refuse is sent', async () => {
    const reply = await exec('accounts', { password: 'short' });
    expect(reply.status).toBe(200);
    expect(gw.upstream.requests.map((r) => r.url)).toEqual(['/v1/accounts?password=short']);
  });
});
