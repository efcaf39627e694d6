import { afterEach, describe, expect, it } from 'vitest';
import { ProtocolError, type ErrorCode } from '../../../src/errors.js';
import { silentLogger } from '../../../src/log.js';
import { deriveCatalog } from '../../../src/openapi/derive.js';
import { defaultPolicy } from '../../../src/policy/policy.js';
import { CompiledValidators, SchemaCompiler } from '../../../src/protocol/argument-validators.js';
import type { AgentAuth } from '../../../src/protocol/authenticate.js';
import { createContext, type ProtocolContext } from '../../../src/protocol/context.js';
import type { SentField } from '../../../src/protocol/constraint-checks.js';
import { authorizeExecution, checkSentRequest, readExecuteBody } from '../../../src/protocol/execute.js';
import { openSqliteStore } from '../../../src/storage/open-sqlite.js';
import type { AgentRecord, GrantRecord, HostRecord, Store } from '../../../src/storage/types.js';

// §5.11 request body, and the §4.5/§5.11 checks that run before anything reaches the upstream,
// over a real SQLite store and a catalog derived from a real (inline) OpenAPI document.

function protocolError(fn: () => unknown): ProtocolError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ProtocolError);
    return err as ProtocolError;
  }
  throw new Error('expected a ProtocolError');
}

function expectCode(fn: () => unknown, code: ErrorCode, status: number): ProtocolError {
  const err = protocolError(fn);
  expect({ code: err.code, status: err.status }).toEqual({ code, status });
  return err;
}

/** The ProtocolError `promise` rejects with, checked against `code` and `status`. */
async function rejectsWith(
  promise: Promise<unknown>,
  code: ErrorCode,
  status: number,
): Promise<ProtocolError> {
  const err = await promise.then(
    () => {
      throw new Error('expected a ProtocolError');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProtocolError);
  const pe = err as ProtocolError;
  expect({ code: pe.code, status: pe.status }).toEqual({ code, status });
  return pe;
}

describe('readExecuteBody (§5.11)', () => {
  it('reads capability and arguments', () => {
    expect(readExecuteBody({ capability: 'get_item', arguments: { id: 1 } })).toEqual({
      name: 'get_item',
      args: { id: 1 },
    });
  });

  it('defaults missing or null arguments to an empty object', () => {
    expect(readExecuteBody({ capability: 'ping' })).toEqual({ name: 'ping', args: {} });
    expect(readExecuteBody({ capability: 'ping', arguments: null })).toEqual({ name: 'ping', args: {} });
  });

  it('ignores other members of the body', () => {
    expect(readExecuteBody({ capability: 'ping', extra: true })).toEqual({ name: 'ping', args: {} });
  });

  it.each([
    ['missing', {}],
    ['empty', { capability: '' }],
    ['a number', { capability: 1 }],
    ['an array', { capability: ['ping'] }],
    ['null', { capability: null }],
  ])('refuses a capability that is %s with invalid_request (400)', (_, body) => {
    const err = expectCode(() => readExecuteBody(body), 'invalid_request', 400);
    expect(err.message).toMatch(/capability/);
  });

  it.each([
    ['an array', []],
    ['a string', '{"id":1}'],
    ['a number', 0],
    ['false', false],
  ])('refuses arguments that are %s with invalid_request (400)', (_, args) => {
    const err = expectCode(
      () => readExecuteBody({ capability: 'ping', arguments: args }),
      'invalid_request',
      400,
    );
    expect(err.message).toMatch(/arguments/);
  });
});

// ---------------------------------------------------------------------------------------------

const NOW = 1_750_000_000_000;
const OK = { '200': { description: 'ok' } };

const doc = {
  openapi: '3.0.3',
  info: { title: 'Bank', version: '1.0.0' },
  paths: {
    '/transfers': {
      post: {
        operationId: 'createTransfer',
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['amount', 'currency'],
                properties: {
                  amount: { type: 'integer', minimum: 1 },
                  currency: { type: 'string', enum: ['EUR', 'USD'] },
                  note: { type: 'string' },
                },
              },
            },
          },
        },
        responses: OK,
      },
    },
    '/ping': { get: { operationId: 'ping', responses: OK } },
  },
};

const stores: Store[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

interface Setup {
  ctx: ProtocolContext;
  auth: (claims?: Record<string, unknown>) => AgentAuth;
  grant: (capability: string, extra?: Partial<GrantRecord>) => Promise<void>;
  authorize: (
    name: string,
    args?: Record<string, unknown>,
    claims?: Record<string, unknown>,
  ) => Promise<unknown>;
}

async function setup(blocked: string[] = []): Promise<Setup> {
  const store = openSqliteStore({ file: ':memory:' });
  stores.push(store);
  const catalog = deriveCatalog([{ source: 'bank.yaml', doc }]);
  const policy = { ...defaultPolicy(catalog), blocked: new Set(blocked) };
  const ctx = createContext({
    store,
    catalog,
    policy,
    clock: { now: () => NOW },
    logger: silentLogger,
    issuer: () => 'http://127.0.0.1:1',
  });
  const jwk = { kty: 'OKP', crv: 'Ed25519', x: 'A'.repeat(43) } as const;
  const host: HostRecord = {
    id: 'hst_1',
    thumbprint: 'host-thumbprint',
    publicJwk: jwk,
    name: 'host',
    userId: 'user-1',
    defaultCapabilities: [],
    status: 'active',
    preRegistered: false,
    admittedByPolicy: false,
    activatedAt: NOW - 1000,
    lastUsedAt: null,
    createdAt: NOW - 1000,
    updatedAt: NOW - 1000,
  };
  const agent: AgentRecord = {
    id: 'agt_1',
    hostId: host.id,
    userId: 'user-1',
    name: 'agent',
    publicJwk: jwk,
    keyThumbprint: 'agent-thumbprint',
    mode: 'delegated',
    status: 'active',
    lastUsedAt: null,
    activatedAt: NOW - 1000,
    createdAt: NOW - 1000,
    updatedAt: NOW - 1000,
  };
  await ctx.write(async (tx) => {
    await tx.insertHost(host);
    await tx.insertAgent(agent);
  });
  const validators = new CompiledValidators(new SchemaCompiler([]));
  let grants = 0;
  const auth = (claims: Record<string, unknown> = {}): AgentAuth => ({ agent, host, claims });
  return {
    ctx,
    auth,
    grant: (capability, extra = {}) =>
      ctx.write((tx) =>
        tx.putGrant({
          id: `grt_${++grants}`,
          agentId: agent.id,
          capability,
          status: 'active',
          constraints: null,
          grantedBy: 'user-1',
          deniedBy: null,
          reason: null,
          expiresAt: null,
          approvalId: null,
          createdAt: NOW - 1000,
          updatedAt: NOW - 1000,
          ...extra,
        }),
      ),
    authorize: (name, args = {}, claims = {}) =>
      authorizeExecution(ctx, auth(claims), { name, args }, validators),
  };
}

const transfer = { amount: 10, currency: 'EUR' };

describe('authorizeExecution (§4.5, §5.11)', () => {
  it('passes an agent with an active grant and valid arguments', async () => {
    const s = await setup();
    await s.grant('create_transfer');
    const result = (await s.authorize('create_transfer', transfer)) as {
      capability: { name: string };
      grant: GrantRecord;
    };
    expect(result.capability.name).toBe('create_transfer');
    expect(result.grant.id).toBe('grt_1');
  });

  it('refuses a capability the JWT capabilities claim does not list (§4.5)', async () => {
    const s = await setup();
    await s.grant('create_transfer');
    await s.grant('ping');
    await rejectsWith(
      s.authorize('create_transfer', transfer, { capabilities: ['ping'] }),
      'capability_not_granted',
      403,
    );
    await expect(s.authorize('ping', {}, { capabilities: ['ping'] })).resolves.toBeDefined();
  });

  it('refuses a capabilities claim that is not an array of strings (§4.3)', async () => {
    const s = await setup();
    await s.grant('ping');
    await rejectsWith(s.authorize('ping', {}, { capabilities: 'ping' }), 'invalid_jwt', 401);
    await rejectsWith(s.authorize('ping', {}, { capabilities: ['ping', 1] }), 'invalid_jwt', 401);
  });

  it('answers capability_not_found for a name the catalog does not have', async () => {
    await rejectsWith((await setup()).authorize('wire_money'), 'capability_not_found', 404);
  });

  it('answers capability_not_granted for a granted capability removed from the catalog (§2.12)', async () => {
    const s = await setup();
    await s.grant('wire_money');
    const err = await rejectsWith(s.authorize('wire_money'), 'capability_not_granted', 403);
    expect(err.message).toMatch(/removed/);
  });

  it('refuses a capability blocked by policy even with a grant', async () => {
    const s = await setup(['create_transfer']);
    await s.grant('create_transfer');
    await rejectsWith(s.authorize('create_transfer', transfer), 'capability_not_granted', 403);
  });

  it('refuses without a grant, or with a grant that is not in effect', async () => {
    const s = await setup();
    await rejectsWith(s.authorize('create_transfer', transfer), 'capability_not_granted', 403);
    await s.grant('create_transfer', { status: 'pending' });
    await rejectsWith(s.authorize('create_transfer', transfer), 'capability_not_granted', 403);
    await s.grant('create_transfer', { status: 'denied' });
    await rejectsWith(s.authorize('create_transfer', transfer), 'capability_not_granted', 403);
    await s.grant('create_transfer', { status: 'active', expiresAt: NOW });
    await rejectsWith(s.authorize('create_transfer', transfer), 'capability_not_granted', 403);
    await s.grant('create_transfer', { status: 'active', expiresAt: NOW + 1 });
    await expect(s.authorize('create_transfer', transfer)).resolves.toBeDefined();
  });

  it('refuses arguments that do not match the input schema, listing each problem', async () => {
    const s = await setup();
    await s.grant('create_transfer');
    const err = await rejectsWith(
      s.authorize('create_transfer', { amount: 0, currency: 'GBP', memo: 'x' }),
      'invalid_request',
      400,
    );
    expect(err.fields.errors).toEqual(
      expect.arrayContaining([
        { path: '/memo', message: 'is not an input of this capability' },
        expect.objectContaining({ path: '/amount' }),
        expect.objectContaining({ path: '/currency' }),
      ]),
    );
    const missing = await rejectsWith(s.authorize('create_transfer', { amount: 5 }), 'invalid_request', 400);
    expect(missing.fields.errors).toEqual([{ path: '/currency', message: 'is required' }]);
  });

  it('reports at most 50 argument errors', async () => {
    const s = await setup();
    await s.grant('ping');
    const args = Object.fromEntries(Array.from({ length: 80 }, (_, i) => [`extra_${i}`, i]));
    const err = await rejectsWith(s.authorize('ping', args), 'invalid_request', 400);
    expect(err.fields.errors).toHaveLength(50);
  });

  it('refuses arguments outside the grant constraints with their violations (§2.13)', async () => {
    const s = await setup();
    await s.grant('create_transfer', { constraints: { amount: { max: 100 }, currency: 'EUR' } });
    await expect(s.authorize('create_transfer', { amount: 100, currency: 'EUR' })).resolves.toBeDefined();
    const err = await rejectsWith(
      s.authorize('create_transfer', { amount: 101, currency: 'USD' }),
      'constraint_violated',
      403,
    );
    expect(err.fields.violations).toEqual([
      { field: 'amount', constraint: { max: 100 }, actual: 101 },
      { field: 'currency', constraint: 'EUR', actual: 'USD' },
    ]);
  });

  it('fails closed on a stored constraint with an unknown operator (§2.13)', async () => {
    const s = await setup();
    await s.grant('create_transfer', { constraints: { amount: { between: [1, 5] } } });
    const err = await rejectsWith(
      s.authorize('create_transfer', transfer),
      'unknown_constraint_operator',
      400,
    );
    expect(err.fields.unknown_operators).toEqual(['between']);
  });

  it('sees a grant revoked through the context at once (§10.2 cache cleared on write)', async () => {
    const s = await setup();
    await s.grant('ping');
    await expect(s.authorize('ping')).resolves.toBeDefined();
    await s.ctx.write((tx) => tx.updateGrant('grt_1', { status: 'revoked' }));
    await rejectsWith(s.authorize('ping'), 'capability_not_granted', 403);
  });
});

describe('checkSentRequest: constraints on the request as sent (§2.13, issue 10 class 5)', () => {
  const grantOf = async (s: Setup) => (await s.ctx.store.grants('agt_1'))[0] as GrantRecord;
  const clean = (text: string): SentField => ({
    own: [{ in: 'body', name: 'amount', text, json: { value: Number(text) }, separators: [] }],
    named: true,
    foreign: [],
  });

  it('asks for no sent values when the grant has no constraints', async () => {
    const s = await setup();
    await s.grant('ping');
    const asked: string[] = [];
    checkSentRequest(await grantOf(s), {
      field: (name) => {
        asked.push(name);
        return clean('1');
      },
    });
    expect(asked).toEqual([]);
  });

  it('refuses a value sent under a constrained name by another argument, with its violations', async () => {
    const s = await setup();
    await s.grant('create_transfer', { constraints: { amount: { max: 100 } } });
    const grant = await grantOf(s);
    expect(() => checkSentRequest(grant, { field: () => clean('100') })).not.toThrow();
    const smuggled: SentField = {
      ...clean('100'),
      foreign: [{ in: 'query', name: 'AMOUNT', text: '5000', separators: [','], by: 'filter' }],
    };
    const err = expectCode(
      () => checkSentRequest(grant, { field: () => smuggled }),
      'constraint_violated',
      403,
    );
    expect(err.fields.violations).toEqual([
      {
        field: 'amount',
        constraint: { max: 100 },
        actual: '5000',
        sent: { in: 'query', name: 'AMOUNT', by: 'filter' },
      },
    ]);
  });

  it('fails closed on a stored unknown operator here too', async () => {
    const s = await setup();
    await s.grant('create_transfer', { constraints: { amount: { between: [1, 5] } } });
    const grant = await grantOf(s);
    expectCode(
      () => checkSentRequest(grant, { field: () => clean('1') }),
      'unknown_constraint_operator',
      400,
    );
  });
});
