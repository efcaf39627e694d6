/**
 * Arguments named after Object.prototype members (`constructor`, `toString`, `valueOf`) and
 * `__proto__`: left out, nothing is sent for them and their type checks do not fire.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import type { TestProtocol } from '../../helpers/protocol.js';
import { writeTempSpec } from '../../helpers/proxy.js';

type Agent = Awaited<ReturnType<TestProtocol['activeAgent']>>;

const OK = {
  '200': { description: 'ok', content: { 'application/json': { schema: { type: 'object' } } } },
};

const SPEC = {
  openapi: '3.0.3',
  info: { title: 'Odd', version: '1' },
  paths: {
    // Optional parameters whose names are Object.prototype members.
    '/inherited': {
      get: {
        operationId: 'inherited',
        parameters: [
          { name: 'q', in: 'query', schema: { type: 'string' } },
          { name: 'constructor', in: 'query', schema: { type: 'string' } },
          { name: 'toString', in: 'header', schema: { type: 'string' } },
        ],
        responses: OK,
      },
    },
    // The same without a type (a schema of {} or none): anything goes.
    '/untyped': {
      get: {
        operationId: 'untyped',
        parameters: [
          { name: 'q', in: 'query', schema: { type: 'string' } },
          { name: 'constructor', in: 'query', schema: {} },
          { name: 'toString', in: 'header', schema: {} },
        ],
        responses: OK,
      },
    },
    // An optional form body field named after an Object.prototype member.
    '/form': {
      post: {
        operationId: 'form',
        requestBody: {
          content: {
            'application/x-www-form-urlencoded': {
              schema: {
                type: 'object',
                properties: { name: { type: 'string' }, valueOf: {} },
              },
            },
          },
        },
        responses: OK,
      },
    },
    // A query parameter named __proto__.
    '/proto': {
      get: {
        operationId: 'proto',
        parameters: [{ name: '__proto__', in: 'query', schema: { type: 'string' } }],
        responses: OK,
      },
    },
  },
};

let gw: Gateway;
let agent: Agent;
beforeAll(async () => {
  gw = await startGateway({ spec: writeTempSpec(SPEC) });
  agent = await gw.p.activeAgent(['inherited', 'untyped', 'form', 'proto']);
});
afterAll(() => gw.close());
afterEach(() => {
  gw.upstream.requests.length = 0;
});

const exec = (capability: string, args: Record<string, unknown>) =>
  gw.p.execute(agent.agent, agent.agentId, capability, args);

describe('parameters named after Object.prototype members', () => {
  it('an optional typed query "constructor" / header "toString" may be omitted', async () => {
    const reply = await exec('inherited', { q: 'x' });
    // Observed: 400 "/constructor must be string; /toString must be string". ajv (default
    // ownProperties: false) checks `data.constructor !== undefined`, which is Object.prototype's
    // function for a JSON-parsed argument object: the optional argument is in effect required.
    // The arguments reach ajv as JSON.parse made them (src/http/body.ts:61, src/protocol/execute.ts:146).
    expect(reply.status).toBe(200);
    expect(gw.upstream.requests.map((r) => r.url)).toEqual(['/v1/inherited?q=x']);
  });

  it('an omitted untyped query "constructor" / header "toString" is not sent', async () => {
    const reply = await exec('untyped', { q: 'x' });
    expect(reply.status).toBe(200);
    expect(gw.upstream.requests).toHaveLength(1);
    const r = gw.upstream.requests[0];
    // buildRequestParts reads args[p.argument] (src/upstream/request-parts.ts:42), which for an
    // absent argument is Object.prototype's function; shapeOf/scalarText make it "" (styles.ts:41,
    // encoding.ts:61-66): "?q=x&constructor=" and a "tostring" header the agent never sent.
    expect(r?.headers.tostring).toBeUndefined();
    expect(r?.url).toBe('/v1/untyped?q=x');
  });

  it('an omitted untyped form field "valueOf" is not sent', async () => {
    const reply = await exec('form', { name: 'n' });
    expect(reply.status).toBe(200);
    // Observed: "name=n&valueOf=" (encodeBody's `args[f] !== undefined`, src/upstream/body-encoding.ts:39).
    expect(gw.upstream.requests[0]?.body.toString('latin1')).toBe('name=n');
  });
});

describe('a query parameter named "__proto__"', () => {
  it('is refused as undeclared when sent (ajv skips the name), and works without it', async () => {
    const withIt = await exec('proto', JSON.parse('{"__proto__":"x"}') as Record<string, unknown>);
    const without = await exec('proto', {});
    // ajv never takes `__proto__` for a declared property (against prototype pollution), so the
    // argument is refused as undeclared: a clear 400, and the call without it works.
    expect([withIt.status, without.status]).toEqual([400, 200]);
    expect(gw.upstream.requests.map((r) => r.url)).toEqual(['/v1/proto']);
  });
});
