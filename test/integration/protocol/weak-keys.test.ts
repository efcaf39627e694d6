/**
 * Keys and tokens (issue 10 class 10; §4.1, §4.2, §4.3) over real HTTP: small-order and
 * non-canonical Ed25519 public keys never become an identity (registration, both rotations, the
 * operator's pre-registration, policy hosts), and an `aud` array is accepted only when it is
 * exactly the expected audience, also at execution.
 */
import { createPublicKey, verify } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UserError } from '../../../src/errors.js';
import { encodeJson, generateTestKey, signJwt, type TestKey } from '../../helpers/keys.js';
import { startProtocol, type Reply, type TestProtocol } from '../../helpers/protocol.js';
import {
  IDENTITY_X,
  NON_CANONICAL_KEYS,
  SMALL_ORDER_KEYS,
  UNIVERSAL_SIGNATURE,
} from '../../helpers/weak-keys.js';

const POLICY = `
rate_limits:
  per_ip: null
  unknown_host_registration: null
`;

const WEAK_KEYS = [...SMALL_ORDER_KEYS, ...NON_CANONICAL_KEYS];
const jwk = (x: string) => ({ kty: 'OKP', crv: 'Ed25519', x });

/** A JWT "signed" for the identity key without any private key. */
function forgedForIdentityKey(typ: string, claims: Record<string, unknown>): string {
  const input = `${encodeJson({ alg: 'EdDSA', typ })}.${encodeJson(claims)}`;
  return `${input}.${UNIVERSAL_SIGNATURE.toString('base64url')}`;
}

let p: TestProtocol;
let linked: { key: TestKey; hostId: string };
beforeAll(async () => {
  p = await startProtocol({ policy: POLICY, overrides: { mockUpstream: true } });
  linked = await p.linkedHost('alice', ['list_pets']);
});
afterAll(() => p.close());

function expectWeakKeyRefused(reply: Reply, field: string): void {
  expect({ status: reply.status, error: reply.body?.error }).toEqual({
    status: 400,
    error: 'invalid_request',
  });
  expect(reply.body.message).toMatch(new RegExp(`^${field}: The JWK "x" is a (small-order|non-canonical)`));
}

async function thumbprintOf(x: string): Promise<string> {
  const { thumbprint } = await import('../../../src/protocol/keys.js');
  return thumbprint({ kty: 'OKP', crv: 'Ed25519', x });
}

describe('small-order and non-canonical Ed25519 keys (§4.1)', () => {
  it('why it matters: node/OpenSSL accepts one forged signature for every message under the identity key', () => {
    const key = createPublicKey({ key: jwk(IDENTITY_X), format: 'jwk' });
    const signature = UNIVERSAL_SIGNATURE;
    expect(verify(null, Buffer.from('any message'), key, signature)).toBe(true);
    expect(verify(null, Buffer.from('another one'), key, signature)).toBe(true);
  });

  it('a host registering as the identity point with a forged signature → 400 before any signature is trusted', async () => {
    const token = forgedForIdentityKey('host+jwt', {
      iss: await thumbprintOf(IDENTITY_X),
      aud: p.issuer,
      iat: Math.floor(p.clock.now() / 1000),
      exp: Math.floor(p.clock.now() / 1000) + 60,
      jti: 'forged-identity-host',
      host_public_key: jwk(IDENTITY_X),
      agent_public_key: (await generateTestKey()).publicJwk,
    });
    const reply = await p.request('POST', '/agent/register', { token, body: { name: 'anyone' } });
    expectWeakKeyRefused(reply, 'host_public_key');
    const hosts = (await p.admin('GET', '/admin/hosts')).body.hosts as { thumbprint: string }[];
    expect(hosts.map((h) => h.thumbprint)).not.toContain(await thumbprintOf(IDENTITY_X));
  });

  it.each(WEAK_KEYS)(
    'registration with a weak host_public_key (%s) → 400 invalid_request',
    async (_name, x) => {
      // Nobody holds a private key for these: the check must come before the signature check.
      const token = await signJwt(
        await generateTestKey(),
        'host+jwt',
        {
          iss: await thumbprintOf(x),
          aud: p.issuer,
          host_public_key: jwk(x),
          agent_public_key: (await generateTestKey()).publicJwk,
        },
        { nowMs: p.clock.now() },
      );
      expectWeakKeyRefused(
        await p.request('POST', '/agent/register', { token, body: { name: 'x' } }),
        'host_public_key',
      );
    },
  );

  it.each(WEAK_KEYS)(
    'registration with a weak agent_public_key (%s) → 400 invalid_request, no agent stored',
    async (_name, x) => {
      const reply = await p.request('POST', '/agent/register', {
        token: await p.hostToken(linked.key, { agent_public_key: jwk(x) }),
        body: { name: 'weak agent' },
      });
      expectWeakKeyRefused(reply, 'agent_public_key');
    },
  );

  it('registration with the identity point as agent key: refused, so no agent anyone could sign for exists', async () => {
    const agentsOf = async () =>
      ((await p.admin('GET', `/admin/agents?host_id=${linked.hostId}`)).body.agents as unknown[]).length;
    const before = await agentsOf();
    const reply = await p.request('POST', '/agent/register', {
      token: await p.hostToken(linked.key, { agent_public_key: jwk(IDENTITY_X) }),
      body: { name: 'shared by everyone', capabilities: ['list_pets'] },
    });
    expectWeakKeyRefused(reply, 'agent_public_key');
    expect(await agentsOf()).toBe(before);
  });

  it.each(WEAK_KEYS)(
    'host key rotation to a weak key (%s) → 400 invalid_request, the old key still works',
    async (_name, x) => {
      const host = await p.linkedHost('bob');
      const reply = await p.request('POST', '/host/rotate-key', {
        token: await p.hostToken(host.key),
        body: { public_key: jwk(x) },
      });
      expectWeakKeyRefused(reply, 'public_key');
      const view = await p.admin('GET', `/admin/hosts/${host.hostId}`);
      expect(view.body.thumbprint).toBe(host.key.thumbprint);
    },
  );

  it.each(WEAK_KEYS)('agent key rotation to a weak key (%s) → 400 invalid_request', async (_name, x) => {
    const reg = await p.register(linked.key, { capabilities: ['list_pets'] });
    expect(reg.status).toBe(200);
    const reply = await p.request('POST', '/agent/rotate-key', {
      token: await p.hostToken(linked.key),
      body: { agent_id: reg.body.agent_id, public_key: jwk(x) },
    });
    expectWeakKeyRefused(reply, 'public_key');
    expect(
      (
        await p.request('GET', '/capability/list', {
          token: await p.agentToken(reg.agent, reg.body.agent_id),
        })
      ).status,
    ).toBe(200);
  });

  it.each(WEAK_KEYS)(
    'operator pre-registration of a weak key (%s) → 400 invalid_request',
    async (_name, x) => {
      const reply = await p.admin('POST', '/admin/hosts', { public_key: jwk(x), user_id: 'carol' });
      expectWeakKeyRefused(reply, 'public_key');
    },
  );

  it('a policy pre-registering a host with a small-order key stops the proxy at start-up, naming the key', async () => {
    const [, x] = SMALL_ORDER_KEYS[6] as readonly [string, string];
    const started = startProtocol({
      policy: `hosts:\n  - public_key: {kty: OKP, crv: Ed25519, x: "${x}"}\n`,
    });
    await expect(started).rejects.toBeInstanceOf(UserError);
    await expect(started).rejects.toThrow(
      /hosts\[0\]\.public_key: The JWK "x" is a small-order Ed25519 point/,
    );
  });
});

describe('aud given as an array (§4.3) at execution', () => {
  let agent: { agent: TestKey; agentId: string };
  beforeAll(async () => {
    agent = await p.activeAgent(['list_pets']);
  });

  it('exactly [the execute location] is accepted', async () => {
    const reply = await p.execute(
      agent.agent,
      agent.agentId,
      'list_pets',
      {},
      { extra: { aud: [p.executeLocation] } },
    );
    expect(reply.status).toBe(200);
  });

  it.each([
    [
      'the execute location and another resource server',
      ['EXECUTE', 'https://other-rs.example/capability/execute'],
    ],
    ['another resource server first', ['https://other-rs.example/capability/execute', 'EXECUTE']],
    ['the execute location and the issuer', ['EXECUTE', 'ISSUER']],
  ])('an array naming %s → 401 invalid_jwt: a token for several audiences is refused', async (_name, aud) => {
    const value = aud.map((v) => (v === 'EXECUTE' ? p.executeLocation : v === 'ISSUER' ? p.issuer : v));
    const reply = await p.execute(agent.agent, agent.agentId, 'list_pets', {}, { extra: { aud: value } });
    expect({ status: reply.status, error: reply.body?.error }).toEqual({ status: 401, error: 'invalid_jwt' });
    expect(reply.body.message).toMatch(/exactly one value/);
  });
});
