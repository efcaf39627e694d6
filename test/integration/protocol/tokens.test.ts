/**
 * Attacks on every host-JWT (§4.2, §4.5.1) and agent-JWT (§4.3, §4.5) rule over real HTTP, plus
 * the token-related security considerations: lifetime and skew (§8.2), replay (§4.6, §8.4, §10.3),
 * private keys (§8.1), key delivery mode and rotation (§8.7). Each test sends one broken token
 * and expects the exact status and `error` code that src/errors.ts and the README declare; the
 * message is matched too, so a token rejected for the wrong reason fails the test.
 */
import { randomUUID, sign, type KeyObject } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  encodeJson,
  generateTestKey,
  hmacJwt,
  signJwt,
  unsignedJwt,
  type TestKey,
} from '../../helpers/keys.js';
import { INTROSPECTION_TOKEN, startProtocol, type Reply, type TestProtocol } from '../../helpers/protocol.js';
import { newKeyPair } from '../../../src/util/key-pair.js';

// Generous approval and session clocks: the replay tests move the clock by minutes in total, and
// nothing here is about lifetimes. Rate limits are off: they are not what is tested.
const POLICY = `
modes: [delegated, autonomous]
approval:
  expires_in: 2h
lifetimes:
  session_ttl: 2h
  max_jwt_lifetime: 60s
  clock_skew: 30s
rate_limits:
  per_ip: null
  unknown_host_registration: null
  # Every attack below fails authentication from 127.0.0.1; the failure budget has its own tests.
  failed_auth_per_ip: null
`;

interface ActiveAgent {
  host: TestKey;
  hostId: string;
  agent: TestKey;
  agentId: string;
}

let p: TestProtocol;
/** An active agent (list_pets, get_pet) of a linked host. */
let fx: ActiveAgent;
/** An active agent of another linked host. */
let other: ActiveAgent;

beforeAll(async () => {
  p = await startProtocol({ policy: POLICY });
  fx = await p.activeAgent(['list_pets', 'get_pet']);
  other = await p.activeAgent(['list_pets']);
});
afterAll(() => p.close());

const ecKey: KeyObject = newKeyPair('ec', { namedCurve: 'P-256' }).privateKey;
const rsaKey: KeyObject = newKeyPair('rsa', { modulusLength: 2048 }).privateKey;

function nowSec(): number {
  return Math.floor(p.clock.now() / 1000);
}

/** Moves the test clock forward to exactly `targetMs`. */
function advanceTo(targetMs: number): void {
  const delta = targetMs - p.clock.now();
  if (delta < 0) throw new Error(`the clock cannot go back ${-delta} ms`);
  p.clock.advance(delta);
}

function expectError(reply: Reply, status: number, code: string, message?: RegExp): void {
  expect({ status: reply.status, error: reply.body?.error }).toEqual({ status, error: code });
  if (message) expect(reply.body.message).toMatch(message);
}

/** A compact JWS signed with a non-Ed25519 algorithm; `alg` in the header is what is claimed. */
function foreignSigned(
  signer: 'ES256' | 'RS256',
  header: Record<string, unknown>,
  payload: Record<string, unknown>,
): string {
  const input = `${encodeJson(header)}.${encodeJson(payload)}`;
  const sig =
    signer === 'ES256'
      ? sign('sha256', Buffer.from(input), { key: ecKey, dsaEncoding: 'ieee-p1363' })
      : sign('sha256', Buffer.from(input), rsaKey);
  return `${input}.${sig.toString('base64url')}`;
}

function times(): { iat: number; exp: number; jti: string } {
  return { iat: nowSec(), exp: nowSec() + 60, jti: randomUUID() };
}

/** A private Ed25519 JWK's `d`, to build "public" keys that carry private material. */
function privateD(key: TestKey): string {
  const jwk = key.privateKey.export({ format: 'jwk' });
  if (typeof jwk.d !== 'string') throw new Error('no d');
  return jwk.d;
}

// ---------------------------------------------------------------------------------------------
// Host JWTs (§4.2, §4.5.1)

interface HostEndpoint {
  readonly name: string;
  call(token: string | undefined, headers?: Record<string, string>): Promise<Reply>;
  /** Claims a valid token for this endpoint needs besides iss, aud and host_public_key. */
  extra(): Promise<Record<string, unknown>>;
}

const hostEndpoints: readonly HostEndpoint[] = [
  {
    name: 'POST /agent/register',
    call: (token, headers) =>
      p.request('POST', '/agent/register', {
        ...(token !== undefined ? { token } : {}),
        body: { name: 'probe' },
        ...(headers ? { headers } : {}),
      }),
    extra: async () => ({ agent_public_key: (await generateTestKey()).publicJwk }),
  },
  {
    name: 'GET /agent/status',
    call: (token, headers) =>
      p.request('GET', `/agent/status?agent_id=${encodeURIComponent(fx.agentId)}`, {
        ...(token !== undefined ? { token } : {}),
        ...(headers ? { headers } : {}),
      }),
    extra: () => Promise.resolve({}),
  },
];

interface TokenOptions {
  claims?: Record<string, unknown>;
  header?: Record<string, unknown>;
  /** The key that signs; the claimed identity's own key by default. */
  signer?: TestKey;
}

/** A host JWT of the linked host `fx.host` (or `identity`) that is valid unless options break it. */
async function hostToken(ep: HostEndpoint, options: TokenOptions = {}, identity = fx.host): Promise<string> {
  return signJwt(
    options.signer ?? identity,
    'host+jwt',
    {
      iss: identity.thumbprint,
      aud: p.issuer,
      host_public_key: identity.publicJwk,
      ...(await ep.extra()),
      ...options.claims,
    },
    { nowMs: p.clock.now(), ...(options.header ? { header: options.header } : {}) },
  );
}

/** The unsigned claim set of a valid host JWT, for tokens built by hand. */
async function hostClaims(ep: HostEndpoint): Promise<Record<string, unknown>> {
  return {
    iss: fx.host.thumbprint,
    aud: p.issuer,
    host_public_key: fx.host.publicJwk,
    ...times(),
    ...(await ep.extra()),
  };
}

describe.each(hostEndpoints)('§4.5.1 host JWT at $name', (ep) => {
  const send = async (options: TokenOptions = {}) => ep.call(await hostToken(ep, options));

  it('accepts a valid host JWT (control)', async () => {
    expect((await send()).status).toBe(200);
  });

  describe('Authorization header', () => {
    it('without Authorization → 401 authentication_required', async () => {
      const reply = await ep.call(undefined);
      expectError(reply, 401, 'authentication_required');
      // RFC 6750 §3 plus the §5.14 AgentAuth challenge that points at discovery.
      expect(reply.headers.get('www-authenticate')).toBe(
        `Bearer, AgentAuth discovery="${p.issuer}/.well-known/agent-configuration"`,
      );
    });

    it('with a scheme other than Bearer → 401 authentication_required with a challenge (RFC 6750 §3.1)', async () => {
      const token = await hostToken(ep);
      const reply = await ep.call(undefined, { authorization: `Basic ${token}` });
      expectError(reply, 401, 'authentication_required');
      // RFC 6750 §3 plus the §5.14 AgentAuth challenge that points at discovery.
      expect(reply.headers.get('www-authenticate')).toBe(
        `Bearer, AgentAuth discovery="${p.issuer}/.well-known/agent-configuration"`,
      );
    });

    it('with an empty Bearer value → 400 invalid_request', async () => {
      expectError(await ep.call(undefined, { authorization: 'Bearer ' }), 400, 'invalid_request');
    });

    it('with a garbage token → 401 invalid_jwt', async () => {
      expectError(await ep.call('not-a-jwt'), 401, 'invalid_jwt', /three parts/);
    });

    it('with a token of 2 segments → 401 invalid_jwt', async () => {
      const [h, b] = (await hostToken(ep)).split('.');
      expectError(await ep.call(`${h}.${b}`), 401, 'invalid_jwt', /three parts/);
    });

    it('with a token of 4 segments → 401 invalid_jwt', async () => {
      const token = await hostToken(ep);
      expectError(await ep.call(`${token}.${token.split('.')[2]}`), 401, 'invalid_jwt', /three parts/);
    });
  });

  describe('typ (§4.2: MUST be host+jwt)', () => {
    it.each([
      ['agent+jwt', 'agent+jwt'],
      ['JWT', 'JWT'],
      ['HOST+JWT (case differs)', 'HOST+JWT'],
      ['application/host+jwt', 'application/host+jwt'],
      ['missing', undefined],
    ])('typ %s → 401 invalid_jwt', async (_name, typ) => {
      expectError(await send({ header: { typ } }), 401, 'invalid_jwt', /typ/);
    });
  });

  describe('alg (§4.1: EdDSA over Ed25519 only)', () => {
    it('alg none, unsigned → 401 invalid_jwt', async () => {
      const token = unsignedJwt({ alg: 'none', typ: 'host+jwt' }, await hostClaims(ep));
      expectError(await ep.call(token), 401, 'invalid_jwt', /alg/);
    });

    it.each([
      ['the JWK x string', (k: TestKey): string | Buffer => k.publicJwk.x],
      ['the raw public key bytes', (k: TestKey): string | Buffer => Buffer.from(k.publicJwk.x, 'base64url')],
      ['the public JWK as JSON', (k: TestKey): string | Buffer => JSON.stringify(k.publicJwk)],
      ['the thumbprint', (k: TestKey): string | Buffer => k.thumbprint],
    ])('HS256 keyed with %s → 401 invalid_jwt', async (_name, secret) => {
      const token = hmacJwt(secret(fx.host), { alg: 'HS256', typ: 'host+jwt' }, await hostClaims(ep));
      expectError(await ep.call(token), 401, 'invalid_jwt', /alg/);
    });

    it('EdDSA header over an HMAC of the public key → 401 invalid_jwt', async () => {
      const token = hmacJwt(fx.host.publicJwk.x, { alg: 'EdDSA', typ: 'host+jwt' }, await hostClaims(ep));
      expectError(await ep.call(token), 401, 'invalid_jwt', /signature/);
    });

    it.each(['ES256', 'RS256'] as const)('%s-signed → 401 invalid_jwt', async (alg) => {
      const token = foreignSigned(alg, { alg, typ: 'host+jwt' }, await hostClaims(ep));
      expectError(await ep.call(token), 401, 'invalid_jwt', /alg/);
    });

    it('alg "Ed25519" (RFC 9864 spelling; §4.1 fixes JWA EdDSA) → 401 invalid_jwt', async () => {
      expectError(await send({ header: { alg: 'Ed25519' } }), 401, 'invalid_jwt', /alg/);
    });

    it('EdDSA header with a 64-byte ES256 signature → 401 invalid_jwt', async () => {
      const token = foreignSigned('ES256', { alg: 'EdDSA', typ: 'host+jwt' }, await hostClaims(ep));
      expectError(await ep.call(token), 401, 'invalid_jwt', /signature/);
    });

    it("EdDSA signed by another key than the host's → 401 invalid_jwt", async () => {
      expectError(await send({ signer: await generateTestKey() }), 401, 'invalid_jwt', /signature/);
    });

    it('an embedded jwk header naming the signing key → 401 invalid_jwt', async () => {
      const attacker = await generateTestKey();
      const reply = await send({ signer: attacker, header: { jwk: attacker.publicJwk } });
      expectError(reply, 401, 'invalid_jwt', /jwk/);
    });

    it('a crit header → 401 invalid_jwt', async () => {
      expectError(await send({ header: { crit: ['exp'] } }), 401, 'invalid_jwt', /crit/);
    });
  });

  describe('aud (§4.5.1 step 3: the issuer URL)', () => {
    it('missing → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { aud: undefined } }), 401, 'invalid_jwt', /aud/);
    });

    it.each([
      ['another server', 'https://evil.example'],
      ['the issuer with a trailing slash', 'ISSUER/'],
      ['the execute location', 'EXECUTE'],
      ['an empty array', []],
      ['an array without the issuer', ['https://evil.example', 'EXECUTE']],
      ['a number', 42],
    ])('%s → 401 invalid_jwt', async (_name, aud) => {
      const resolve = (v: unknown): unknown =>
        v === 'ISSUER/' ? `${p.issuer}/` : v === 'EXECUTE' ? p.executeLocation : v;
      const value = Array.isArray(aud) ? aud.map(resolve) : resolve(aud);
      expectError(await send({ claims: { aud: value } }), 401, 'invalid_jwt', /aud/);
    });

    it('an array of exactly the issuer is accepted (RFC 7519 §4.1.3)', async () => {
      expect((await send({ claims: { aud: [p.issuer] } })).status).toBe(200);
    });

    it.each([
      ['another server first', ['https://other.example', 'ISSUER']],
      ['another server after', ['ISSUER', 'https://other.example']],
      ['the issuer twice', ['ISSUER', 'ISSUER']],
      ['the execute location too', ['ISSUER', 'EXECUTE']],
    ])(
      'an array naming the issuer besides others (%s) → 401 invalid_jwt, not replayable elsewhere',
      async (_name, aud) => {
        const value = aud.map((v) => (v === 'ISSUER' ? p.issuer : v === 'EXECUTE' ? p.executeLocation : v));
        expectError(await send({ claims: { aud: value } }), 401, 'invalid_jwt', /exactly one value/);
      },
    );
  });

  describe('iss and the signing key (§4.2)', () => {
    it('missing iss → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { iss: undefined } }), 401, 'invalid_jwt', /iss/);
    });

    it('iss naming another key than host_public_key → 401 invalid_jwt', async () => {
      const stranger = await generateTestKey();
      const reply = await send({ claims: { iss: stranger.thumbprint } });
      expectError(reply, 401, 'invalid_jwt', /thumbprint|Unknown host/);
    });

    it('iss of the known host but signed by another key → 401 invalid_jwt', async () => {
      expectError(await send({ signer: await generateTestKey() }), 401, 'invalid_jwt', /signature/);
    });

    it('host_public_key differing from the stored key (signed by that key) → 401 invalid_jwt', async () => {
      const attacker = await generateTestKey();
      const reply = await send({ signer: attacker, claims: { host_public_key: attacker.publicJwk } });
      expectError(reply, 401, 'invalid_jwt', /host_public_key/);
    });

    it('host_public_key differing from the stored key (signed by the stored key) → 401 invalid_jwt', async () => {
      const reply = await send({ claims: { host_public_key: (await generateTestKey()).publicJwk } });
      expectError(reply, 401, 'invalid_jwt', /host_public_key/);
    });

    it("kid set to the trusted host's thumbprint, signed by another key → 401 invalid_jwt", async () => {
      const attacker = await generateTestKey();
      const reply = await send({ signer: attacker, header: { kid: fx.host.thumbprint } });
      expectError(reply, 401, 'invalid_jwt', /signature/);
    });

    it('the stored key with a private "d" presented as host_public_key → 401 invalid_jwt', async () => {
      const reply = await send({
        claims: { host_public_key: { ...fx.host.publicJwk, d: privateD(fx.host) } },
      });
      expectError(reply, 401, 'invalid_jwt', /host_public_key/);
    });
  });

  describe('exp and iat (§4.5.1 step 5, §8.2: 30 s skew, 60 s lifetime)', () => {
    it('exp missing → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { exp: undefined } }), 401, 'invalid_jwt', /"exp"/);
    });

    it('iat missing → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { iat: undefined } }), 401, 'invalid_jwt', /"iat"/);
    });

    it('exp as a string → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { exp: String(nowSec() + 60) } }), 401, 'invalid_jwt', /"exp"/);
    });

    it('expired beyond the skew → 401 invalid_jwt', async () => {
      const reply = await send({ claims: { iat: nowSec() - 91, exp: nowSec() - 31 } });
      expectError(reply, 401, 'invalid_jwt', /expired/);
    });

    it('expired but within the skew → accepted', async () => {
      expect((await send({ claims: { iat: nowSec() - 80, exp: nowSec() - 20 } })).status).toBe(200);
    });

    it('iat in the future beyond the skew → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { iat: nowSec() + 32 } }), 401, 'invalid_jwt', /future/);
    });

    it('iat in the future within the skew → accepted', async () => {
      expect((await send({ claims: { iat: nowSec() + 29 } })).status).toBe(200);
    });

    it('lifetime exp - iat above max_jwt_lifetime → 401 invalid_jwt', async () => {
      const reply = await send({ claims: { iat: nowSec(), exp: nowSec() + 61 } });
      expectError(reply, 401, 'invalid_jwt', /lifetime/);
    });

    it('exp = iat → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { iat: nowSec(), exp: nowSec() } }), 401, 'invalid_jwt', /after/);
    });

    it('exp < iat → 401 invalid_jwt', async () => {
      const reply = await send({ claims: { iat: nowSec(), exp: nowSec() - 10 } });
      expectError(reply, 401, 'invalid_jwt', /after/);
    });

    it('nbf in the future beyond the skew → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { nbf: nowSec() + 40 } }), 401, 'invalid_jwt', /nbf/);
    });
  });

  describe('jti (§4.6, §8.4)', () => {
    it('missing → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { jti: undefined } }), 401, 'invalid_jwt', /jti/);
    });

    it.each([
      ['empty', ''],
      ['a number', 7],
    ])('%s → 401 invalid_jwt', async (_name, jti) => {
      expectError(await send({ claims: { jti } }), 401, 'invalid_jwt', /jti/);
    });

    it('the same token twice → second 401 invalid_jwt', async () => {
      const token = await hostToken(ep);
      expect((await ep.call(token)).status).toBe(200);
      expectError(await ep.call(token), 401, 'invalid_jwt', /already used/);
    });

    it('another token reusing a jti → 401 invalid_jwt', async () => {
      const jti = randomUUID();
      expect((await send({ claims: { jti } })).status).toBe(200);
      const reply = await send({ claims: { jti, iat: nowSec() - 5 } });
      expectError(reply, 401, 'invalid_jwt', /already used/);
    });
  });
});

describe('§4.5.1 host JWT: endpoint-specific rules', () => {
  const register = hostEndpoints[0] as HostEndpoint;
  const status = hostEndpoints[1] as HostEndpoint;

  it('a new host whose iss is not the thumbprint of host_public_key cannot register', async () => {
    const fresh = await generateTestKey();
    const stranger = await generateTestKey();
    const token = await hostToken(register, { claims: { iss: stranger.thumbprint } }, fresh);
    expectError(await register.call(token), 401, 'invalid_jwt', /thumbprint/);
  });

  it('a new host without host_public_key cannot register', async () => {
    const fresh = await generateTestKey();
    const token = await hostToken(register, { claims: { host_public_key: undefined } }, fresh);
    expectError(await register.call(token), 401, 'invalid_jwt', /host_public_key/);
  });

  it('an unknown host (valid self-signed JWT) gets no status → 401 invalid_jwt', async () => {
    const fresh = await generateTestKey();
    expectError(await status.call(await hostToken(status, {}, fresh)), 401, 'invalid_jwt', /Unknown host/);
  });

  it('a host JWT at an agent endpoint (token confusion) → 401 invalid_jwt', async () => {
    const token = await hostToken(status);
    const reply = await p.request('POST', '/agent/request-capability', {
      token,
      body: { capabilities: ['create_pet'] },
    });
    expectError(reply, 401, 'invalid_jwt', /typ/);
  });

  it('kid set to a trusted host, signed by an attacker for its own iss: a new pending host, not the trusted one', async () => {
    const attacker = await generateTestKey();
    const agent = await generateTestKey();
    const token = await signJwt(
      attacker,
      'host+jwt',
      {
        iss: attacker.thumbprint,
        aud: p.issuer,
        host_public_key: attacker.publicJwk,
        agent_public_key: agent.publicJwk,
      },
      { nowMs: p.clock.now(), header: { kid: fx.host.thumbprint } },
    );
    const reply = await p.request('POST', '/agent/register', {
      token,
      body: { name: 'impostor', capabilities: ['list_pets'] },
    });
    expect(reply.status).toBe(200);
    expect(reply.body.host_id).not.toBe(fx.hostId);
    expect(reply.body.status).toBe('pending');
    expect(reply.body.user_id).toBeUndefined();
    const hosts = await p.admin('GET', '/admin/hosts');
    const created = (hosts.body.hosts as any[]).find((h) => h.host_id === reply.body.host_id);
    expect(created).toMatchObject({ status: 'pending', thumbprint: attacker.thumbprint, user_id: null });
  });
});

// ---------------------------------------------------------------------------------------------
// Agent JWTs (§4.3, §4.5)

interface AgentEndpoint {
  readonly name: string;
  call(token: string | undefined, headers?: Record<string, string>): Promise<Reply>;
  /** Asserts the request passed authentication. */
  expectAccepted(reply: Reply): void;
}

const agentEndpoints: readonly AgentEndpoint[] = [
  {
    name: 'GET /capability/list',
    call: (token, headers) =>
      p.request('GET', '/capability/list', {
        ...(token !== undefined ? { token } : {}),
        ...(headers ? { headers } : {}),
      }),
    expectAccepted: (reply) => {
      expect(reply.status).toBe(200);
      expect(reply.body.capabilities[0].grant_status).toBeDefined();
    },
  },
  {
    name: 'POST /agent/request-capability',
    // An empty body fails validation, which runs only after authentication succeeded.
    call: (token, headers) =>
      p.request('POST', '/agent/request-capability', {
        ...(token !== undefined ? { token } : {}),
        body: {},
        ...(headers ? { headers } : {}),
      }),
    expectAccepted: (reply) => expectError(reply, 400, 'invalid_request', /capabilities is required/),
  },
];

/** An agent JWT for `who` (fx by default), valid unless options break it. */
function agentToken(options: TokenOptions = {}, who: ActiveAgent = fx): Promise<string> {
  return signJwt(
    options.signer ?? who.agent,
    'agent+jwt',
    { sub: who.agentId, aud: p.issuer, ...options.claims },
    { nowMs: p.clock.now(), ...(options.header ? { header: options.header } : {}) },
  );
}

function agentClaims(): Record<string, unknown> {
  return { sub: fx.agentId, aud: p.issuer, ...times() };
}

describe.each(agentEndpoints)('§4.5 agent JWT at $name', (ep) => {
  const send = async (options: TokenOptions = {}, who?: ActiveAgent) =>
    ep.call(await agentToken(options, who));

  it('accepts a valid agent JWT (control)', async () => {
    ep.expectAccepted(await send());
  });

  describe('Authorization header', () => {
    it('with a scheme other than Bearer → 401 authentication_required with a challenge (RFC 6750 §3.1)', async () => {
      const token = await agentToken();
      const reply = await ep.call(undefined, { authorization: `Basic ${token}` });
      expectError(reply, 401, 'authentication_required');
      // RFC 6750 §3 plus the §5.14 AgentAuth challenge that points at discovery.
      expect(reply.headers.get('www-authenticate')).toBe(
        `Bearer, AgentAuth discovery="${p.issuer}/.well-known/agent-configuration"`,
      );
    });

    it('with a garbage token → 401 invalid_jwt', async () => {
      expectError(await ep.call('garbage'), 401, 'invalid_jwt');
    });

    it('with a token of 2 segments → 401 invalid_jwt', async () => {
      const [h, b] = (await agentToken()).split('.');
      expectError(await ep.call(`${h}.${b}`), 401, 'invalid_jwt', /three parts/);
    });

    it('with a token of 4 segments → 401 invalid_jwt', async () => {
      const token = await agentToken();
      expectError(await ep.call(`${token}.${token.split('.')[2]}`), 401, 'invalid_jwt', /three parts/);
    });
  });

  describe('typ (§4.3: MUST be agent+jwt)', () => {
    it.each([
      ['host+jwt', 'host+jwt'],
      ['JWT', 'JWT'],
      ['AGENT+JWT (case differs)', 'AGENT+JWT'],
      ['missing', undefined],
    ])('typ %s → 401 invalid_jwt', async (_name, typ) => {
      // A host+jwt-typed token is read as a host JWT by the capability listing; it has no iss.
      expectError(await send({ header: { typ } }), 401, 'invalid_jwt', /typ|iss/);
    });

    it('host+jwt typ with the host iss, signed by the agent → 401 invalid_jwt', async () => {
      const reply = await send({ header: { typ: 'host+jwt' }, claims: { iss: fx.host.thumbprint } });
      expectError(reply, 401, 'invalid_jwt', /typ|signature/);
    });
  });

  describe('alg (§4.1)', () => {
    it('alg none, unsigned → 401 invalid_jwt', async () => {
      expectError(
        await ep.call(unsignedJwt({ alg: 'none', typ: 'agent+jwt' }, agentClaims())),
        401,
        'invalid_jwt',
        /alg/,
      );
    });

    it.each([
      ['the JWK x string', (k: TestKey): string | Buffer => k.publicJwk.x],
      ['the raw public key bytes', (k: TestKey): string | Buffer => Buffer.from(k.publicJwk.x, 'base64url')],
    ])('HS256 keyed with %s → 401 invalid_jwt', async (_name, secret) => {
      const token = hmacJwt(secret(fx.agent), { alg: 'HS256', typ: 'agent+jwt' }, agentClaims());
      expectError(await ep.call(token), 401, 'invalid_jwt', /alg/);
    });

    it.each(['ES256', 'RS256'] as const)('%s-signed → 401 invalid_jwt', async (alg) => {
      expectError(
        await ep.call(foreignSigned(alg, { alg, typ: 'agent+jwt' }, agentClaims())),
        401,
        'invalid_jwt',
        /alg/,
      );
    });

    it('EdDSA header, signature from an unrelated key → 401 invalid_jwt', async () => {
      expectError(await send({ signer: await generateTestKey() }), 401, 'invalid_jwt', /signature/);
    });

    it('an embedded jwk header → 401 invalid_jwt', async () => {
      const attacker = await generateTestKey();
      const reply = await send({ signer: attacker, header: { jwk: attacker.publicJwk } });
      expectError(reply, 401, 'invalid_jwt', /jwk/);
    });
  });

  describe('aud (§4.3: the issuer for non-execution requests)', () => {
    it('missing → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { aud: undefined } }), 401, 'invalid_jwt', /aud/);
    });

    it('another server → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { aud: 'https://evil.example' } }), 401, 'invalid_jwt', /aud/);
    });

    it('the execute location where the issuer is required → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { aud: p.executeLocation } }), 401, 'invalid_jwt', /aud/);
    });

    it('an array without the issuer → 401 invalid_jwt', async () => {
      const reply = await send({ claims: { aud: [p.executeLocation, `${p.issuer}/`] } });
      expectError(reply, 401, 'invalid_jwt', /aud/);
    });

    it('an array of exactly the issuer is accepted (RFC 7519 §4.1.3)', async () => {
      ep.expectAccepted(await send({ claims: { aud: [p.issuer] } }));
    });

    it('an array naming the issuer and the execute location → 401 invalid_jwt', async () => {
      const reply = await send({ claims: { aud: [p.executeLocation, p.issuer] } });
      expectError(reply, 401, 'invalid_jwt', /exactly one value/);
    });

    it('an array naming the issuer and another server → 401 invalid_jwt', async () => {
      const reply = await send({ claims: { aud: [p.issuer, 'https://other.example'] } });
      expectError(reply, 401, 'invalid_jwt', /exactly one value/);
    });
  });

  describe('sub, iss and the signing key (§4.5 steps 4, 5, 7)', () => {
    it('signed by the host key, sub = the agent → 401 invalid_jwt', async () => {
      expectError(await send({ signer: fx.host }), 401, 'invalid_jwt', /signature/);
    });

    it("signed by another host's agent key, sub = the agent → 401 invalid_jwt", async () => {
      expectError(await send({ signer: other.agent }), 401, 'invalid_jwt', /signature/);
    });

    it("signed by a sibling agent's key (same host), sub = the agent → 401 invalid_jwt", async () => {
      const sibling = await p.register(fx.host, { name: 'sibling' });
      expect(sibling.status).toBe(200);
      expectError(await send({ signer: sibling.agent }), 401, 'invalid_jwt', /signature/);
    });

    it("kid set to the agent's thumbprint, signed by another key → 401 invalid_jwt", async () => {
      const reply = await send({ signer: await generateTestKey(), header: { kid: fx.agent.thumbprint } });
      expectError(reply, 401, 'invalid_jwt', /signature/);
    });

    it('sub of an unknown agent → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { sub: 'agt_does_not_exist' } }), 401, 'invalid_jwt', /Unknown agent/);
    });

    it('sub missing → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { sub: undefined } }), 401, 'invalid_jwt', /sub/);
    });

    it('iss of a different host → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { iss: other.host.thumbprint } }), 401, 'invalid_jwt', /iss/);
    });

    it('iss of its own host is accepted', async () => {
      ep.expectAccepted(await send({ claims: { iss: fx.host.thumbprint } }));
    });

    it('no iss is accepted: the host is resolved from sub (SDK interop)', async () => {
      const token = await agentToken({ claims: { iss: undefined } });
      expect(
        JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString()),
      ).not.toHaveProperty('iss');
      ep.expectAccepted(await ep.call(token));
    });

    it('kid equal to its own thumbprint, signed by its own key, is accepted', async () => {
      ep.expectAccepted(await send({ header: { kid: fx.agent.thumbprint } }));
    });
  });

  describe('exp, iat, jti (§4.5 step 8, §8.2)', () => {
    it('exp missing → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { exp: undefined } }), 401, 'invalid_jwt', /"exp"/);
    });

    it('expired beyond the skew → 401 invalid_jwt', async () => {
      expectError(
        await send({ claims: { iat: nowSec() - 91, exp: nowSec() - 31 } }),
        401,
        'invalid_jwt',
        /expired/,
      );
    });

    it('expired within the skew → accepted', async () => {
      ep.expectAccepted(await send({ claims: { iat: nowSec() - 80, exp: nowSec() - 20 } }));
    });

    it('iat in the future beyond the skew → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { iat: nowSec() + 32 } }), 401, 'invalid_jwt', /future/);
    });

    it('iat in the future within the skew → accepted', async () => {
      ep.expectAccepted(await send({ claims: { iat: nowSec() + 29 } }));
    });

    it('lifetime above max_jwt_lifetime → 401 invalid_jwt', async () => {
      expectError(
        await send({ claims: { iat: nowSec(), exp: nowSec() + 61 } }),
        401,
        'invalid_jwt',
        /lifetime/,
      );
    });

    it('exp <= iat → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { iat: nowSec(), exp: nowSec() } }), 401, 'invalid_jwt', /after/);
    });

    it('jti missing → 401 invalid_jwt', async () => {
      expectError(await send({ claims: { jti: undefined } }), 401, 'invalid_jwt', /jti/);
    });

    it('the same token twice → second 401 invalid_jwt', async () => {
      const token = await agentToken();
      ep.expectAccepted(await ep.call(token));
      expectError(await ep.call(token), 401, 'invalid_jwt', /already used/);
    });
  });
});

describe('§4.5 agent JWT: endpoint-specific rules', () => {
  it('POST /agent/request-capability without Authorization → 401 authentication_required', async () => {
    const reply = await p.request('POST', '/agent/request-capability', {
      body: { capabilities: ['create_pet'] },
    });
    expectError(reply, 401, 'authentication_required');
  });

  it('GET /capability/list without Authorization is the public listing, without grant_status', async () => {
    const reply = await p.request('GET', '/capability/list');
    expect(reply.status).toBe(200);
    for (const c of reply.body.capabilities) expect(c).not.toHaveProperty('grant_status');
  });

  it('an agent JWT at a host endpoint (token confusion) → 401 invalid_jwt', async () => {
    const token = await agentToken({ claims: { iss: fx.host.thumbprint } });
    const reply = await p.request('GET', `/agent/status?agent_id=${fx.agentId}`, { token });
    expectError(reply, 401, 'invalid_jwt', /typ/);
  });

  it('an agent-typed JWT signed by the host with the host claims → 401 invalid_jwt', async () => {
    const token = await signJwt(
      fx.host,
      'agent+jwt',
      {
        iss: fx.host.thumbprint,
        sub: fx.agentId,
        aud: p.issuer,
        host_public_key: fx.host.publicJwk,
      },
      { nowMs: p.clock.now() },
    );
    expectError(await p.request('GET', '/capability/list', { token }), 401, 'invalid_jwt', /signature/);
  });
});

describe('§4.3 / §4.5 step 11: the capabilities claim', () => {
  // Execution applies the claim too (test/integration/execute/authorization.test.ts); here,
  // introspection (§5.12) and asking for capabilities (§5.4).
  const introspect = (token: string) =>
    p.request('POST', '/agent/introspect', { token: INTROSPECTION_TOKEN, body: { token } });

  it('narrows the grants a token stands for', async () => {
    const reply = await introspect(await agentToken({ claims: { capabilities: ['list_pets'] } }));
    expect(reply.status).toBe(200);
    expect(reply.body.active).toBe(true);
    expect(reply.body.agent_capability_grants).toEqual([{ capability: 'list_pets', status: 'active' }]);
  });

  it('without the claim the token stands for every grant', async () => {
    const reply = await introspect(await agentToken());
    const names = (reply.body.agent_capability_grants as { capability: string }[]).map((g) => g.capability);
    expect(names.sort()).toEqual(['get_pet', 'list_pets']);
  });

  it.each([
    ['a string', 'list_pets'],
    ['an object', { list_pets: true }],
    ['an array with a number', ['list_pets', 1]],
  ])('a malformed claim (%s) is an invalid token, never "all capabilities"', async (_name, capabilities) => {
    const reply = await introspect(await agentToken({ claims: { capabilities } }));
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ active: false });
  });

  it('a token scoped by the claim cannot ask for a capability outside it (§5.4): 403, nothing asked', async () => {
    const ask = async (claims: Record<string, unknown>) =>
      p.request('POST', '/agent/request-capability', {
        token: await agentToken({ claims }),
        body: { capabilities: ['create_pet'] },
      });
    const approvalsBefore = (await p.proxy.protocol.store.approvals({ agentId: fx.agentId })).length;
    expectError(await ask({ capabilities: ['list_pets'] }), 403, 'capability_not_granted', /create_pet/);
    expectError(await ask({ capabilities: [] }), 403, 'capability_not_granted', /create_pet/);
    expect((await p.proxy.protocol.store.approvals({ agentId: fx.agentId })).length).toBe(approvalsBefore);
    expect((await ask({ capabilities: ['list_pets', 'create_pet'] })).status).toBe(200);
  });

  it('a malformed claim is refused at the capability listing too → 401 invalid_jwt', async () => {
    const reply = await p.request('GET', '/capability/list', {
      token: await agentToken({ claims: { capabilities: 'list_pets' } }),
    });
    expectError(reply, 401, 'invalid_jwt', /capabilities/);
  });
});

// ---------------------------------------------------------------------------------------------
// Replay and the effective window, with the test clock (§4.6, §8.2, §8.4, §10.3)

describe('§8.2 exact skew boundaries', () => {
  const list = (token: string) => p.request('GET', '/capability/list', { token });

  it('an agent JWT is accepted until exp + 30 s (exclusive), then expired', async () => {
    const iat = nowSec();
    const exp = iat + 60;
    const last = await agentToken({ claims: { iat, exp } });
    const tooLate = await agentToken({ claims: { iat, exp } });
    advanceTo((exp + 30) * 1000 - 1);
    expect((await list(last)).status).toBe(200);
    p.clock.advance(1);
    expectError(await list(tooLate), 401, 'invalid_jwt', /expired/);
  });

  it('a host JWT with iat exactly 30 s ahead is accepted; 1 ms more skew is rejected', async () => {
    const iat = nowSec() + 45;
    const token = await hostToken(hostEndpoints[1] as HostEndpoint, { claims: { iat, exp: iat + 60 } });
    const status = (t: string) => p.request('GET', `/agent/status?agent_id=${fx.agentId}`, { token: t });
    advanceTo(iat * 1000 - 30_000 - 1);
    expectError(await status(token), 401, 'invalid_jwt', /future/);
    // The rejected attempt did not burn the jti: the same token is good 1 ms later.
    p.clock.advance(1);
    expect((await status(token)).status).toBe(200);
  });
});

describe('§8.2 / §8.4 replay cache covers the whole effective window (lifetime + skew)', () => {
  const list = (token: string) => p.request('GET', '/capability/list', { token });
  const status = (token: string) => p.request('GET', `/agent/status?agent_id=${fx.agentId}`, { token });

  it('agent JWT: replayed 1 ms before exp + skew → still a replay; after that → expired', async () => {
    const iat = nowSec();
    const exp = iat + 60;
    const token = await agentToken({ claims: { iat, exp } });
    expect((await list(token)).status).toBe(200);
    advanceTo((exp + 30) * 1000 - 1);
    expectError(await list(token), 401, 'invalid_jwt', /already used/);
    p.clock.advance(1);
    expectError(await list(token), 401, 'invalid_jwt', /expired/);
  });

  it('host JWT: replayed 1 ms before exp + skew → still a replay', async () => {
    const iat = nowSec();
    const exp = iat + 60;
    const token = await hostToken(hostEndpoints[1] as HostEndpoint, { claims: { iat, exp } });
    expect((await status(token)).status).toBe(200);
    advanceTo((exp + 30) * 1000 - 1);
    expectError(await status(token), 401, 'invalid_jwt', /already used/);
  });

  it('a token issued 30 s in the future is remembered until its own exp + skew, not now + lifetime + skew', async () => {
    const iat = nowSec() + 30;
    const exp = iat + 60;
    const token = await agentToken({ claims: { iat, exp } });
    expect((await list(token)).status).toBe(200);
    advanceTo((exp + 30) * 1000 - 1);
    expectError(await list(token), 401, 'invalid_jwt', /already used/);
  });

  it('a jti reused by a later token with a later exp is refused until that exp + skew', async () => {
    const jti = randomUUID();
    const first = await agentToken({ claims: { jti } });
    expect((await list(first)).status).toBe(200);
    p.clock.advance(50_000);
    const iat = nowSec();
    const second = await agentToken({ claims: { jti, iat, exp: iat + 60 } });
    expectError(await list(second), 401, 'invalid_jwt', /already used/);
    advanceTo((iat + 60 + 30) * 1000 - 1);
    const third = await agentToken({ claims: { jti, iat: nowSec() - 50, exp: nowSec() + 10 } });
    expectError(await list(third), 401, 'invalid_jwt', /already used/);
  });

  it('a forged token cannot burn a jti: the genuine token with that jti is still accepted', async () => {
    const jti = randomUUID();
    const forged = await agentToken({ claims: { jti }, signer: await generateTestKey() });
    expectError(await list(forged), 401, 'invalid_jwt', /signature/);
    expect((await list(await agentToken({ claims: { jti } }))).status).toBe(200);
  });

  it('jti values are partitioned by principal: two hosts with the same jti both succeed', async () => {
    const jti = `shared-${randomUUID()}`;
    const a = await hostToken(hostEndpoints[1] as HostEndpoint, { claims: { jti } });
    expect((await status(a)).status).toBe(200);
    const b = await signJwt(
      other.host,
      'host+jwt',
      { iss: other.host.thumbprint, aud: p.issuer, jti },
      { nowMs: p.clock.now() },
    );
    const reply = await p.request('GET', `/agent/status?agent_id=${other.agentId}`, { token: b });
    expect(reply.status).toBe(200);
    // …and each is still a replay within its own partition.
    expectError(await status(a), 401, 'invalid_jwt', /already used/);
  });

  it('two agents and a host with the same jti all succeed', async () => {
    const jti = `shared-${randomUUID()}`;
    expect((await list(await agentToken({ claims: { jti } }))).status).toBe(200);
    expect((await list(await agentToken({ claims: { jti } }, other))).status).toBe(200);
    expect(
      (await status(await hostToken(hostEndpoints[1] as HostEndpoint, { claims: { jti } }))).status,
    ).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------------
// Keys (§4.1, §8.1) and key delivery (§8.7)

describe('§4.1 / §8.1 / §8.7 keys presented in tokens and bodies', () => {
  async function registerWith(claims: Record<string, unknown>, host?: TestKey): Promise<Reply> {
    const key = host ?? (await generateTestKey());
    const token = await signJwt(
      key,
      'host+jwt',
      {
        iss: key.thumbprint,
        aud: p.issuer,
        host_public_key: key.publicJwk,
        agent_public_key: (await generateTestKey()).publicJwk,
        ...claims,
      },
      { nowMs: p.clock.now() },
    );
    return p.request('POST', '/agent/register', { token, body: { name: 'keys' } });
  }

  it('host_jwks_url beside host_public_key → 400 invalid_request (§4.2: one or the other)', async () => {
    const reply = await registerWith({ host_jwks_url: 'https://keys.example/host.json' });
    expectError(reply, 400, 'invalid_request', /not both/);
  });

  it('agent_jwks_url over plain http → 400 invalid_request (§8.12 https only; more in test/integration/jwks)', async () => {
    const reply = await registerWith({
      agent_public_key: undefined,
      agent_jwks_url: 'http://keys.example/agent.json',
      agent_kid: 'a1',
    });
    expectError(reply, 400, 'invalid_request', /must use https/);
  });

  it('§8.7 an inline-key host presenting host_jwks_url later → 400 invalid_request', async () => {
    const token = await signJwt(
      fx.host,
      'host+jwt',
      { iss: fx.host.thumbprint, aud: p.issuer, host_jwks_url: 'https://keys.example/host.json' },
      { nowMs: p.clock.now(), header: { kid: fx.host.thumbprint } },
    );
    const reply = await p.request('GET', `/agent/status?agent_id=${fx.agentId}`, { token });
    expectError(reply, 400, 'invalid_request', /host_jwks_url/);
  });

  it('agent_public_key with a private "d" → 400 invalid_request', async () => {
    const agent = await generateTestKey();
    const reply = await registerWith({ agent_public_key: { ...agent.publicJwk, d: privateD(agent) } });
    expectError(reply, 400, 'invalid_request', /private/);
  });

  it('host_public_key with a private "d" (new host) → 400 invalid_request', async () => {
    const host = await generateTestKey();
    const reply = await registerWith({ host_public_key: { ...host.publicJwk, d: privateD(host) } }, host);
    expectError(reply, 400, 'invalid_request', /private/);
  });

  it.each([
    [
      'kty EC',
      {
        kty: 'EC',
        crv: 'P-256',
        x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU',
        y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0',
      },
    ],
    ['crv X25519', { kty: 'OKP', crv: 'X25519', x: 'hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmo' }],
    [
      'kty RSA',
      {
        kty: 'RSA',
        n: 'sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw',
        e: 'AQAB',
      },
    ],
    [
      'Ed25519 with alg ES256',
      { kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo', alg: 'ES256' },
    ],
  ])('agent_public_key with %s → 400 unsupported_algorithm', async (_name, jwk) => {
    expectError(await registerWith({ agent_public_key: jwk }), 400, 'unsupported_algorithm');
  });

  it('host_public_key with crv X25519 (new host) → 400 unsupported_algorithm', async () => {
    const reply = await registerWith({
      host_public_key: { kty: 'OKP', crv: 'X25519', x: 'hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmo' },
    });
    expectError(reply, 400, 'unsupported_algorithm');
  });

  it('an EC key with a private "d" is refused as private material first → 400 invalid_request', async () => {
    const reply = await registerWith({
      agent_public_key: {
        kty: 'EC',
        crv: 'P-256',
        x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU',
        y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0',
        d: 'jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI',
      },
    });
    expectError(reply, 400, 'invalid_request', /private/);
  });

  it('POST /agent/rotate-key with a private "d" → 400 invalid_request; with X25519 → 400 unsupported_algorithm', async () => {
    const next = await generateTestKey();
    const send = async (public_key: unknown) =>
      p.request('POST', '/agent/rotate-key', {
        token: await p.hostToken(fx.host),
        body: { agent_id: fx.agentId, public_key },
      });
    expectError(await send({ ...next.publicJwk, d: privateD(next) }), 400, 'invalid_request', /private/);
    expectError(await send({ kty: 'OKP', crv: 'X25519', x: next.publicJwk.x }), 400, 'unsupported_algorithm');
  });

  it('POST /host/rotate-key with a private "d" → 400 invalid_request; with kty EC → 400 unsupported_algorithm', async () => {
    const next = await generateTestKey();
    const send = async (public_key: unknown) =>
      p.request('POST', '/host/rotate-key', { token: await p.hostToken(fx.host), body: { public_key } });
    expectError(await send({ ...next.publicJwk, d: privateD(next) }), 400, 'invalid_request', /private/);
    expectError(
      await send({
        kty: 'EC',
        crv: 'P-256',
        x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU',
        y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0',
      }),
      400,
      'unsupported_algorithm',
    );
  });

  it('§5.9 / §8.7 after an inline host key rotation, the old key and the old iss stop working at once', async () => {
    const a = await p.activeAgent(['list_pets']);
    const next = await generateTestKey();
    const rotated = await p.request('POST', '/host/rotate-key', {
      token: await p.hostToken(a.host),
      body: { public_key: next.publicJwk, proof: await p.hostToken(next) },
    });
    expect(rotated.status).toBe(200);
    // Old host key: its thumbprint no longer names a host.
    expectError(await p.status(a.host, a.agentId), 401, 'invalid_jwt', /Unknown host/);
    // Old iss, signed with the new key.
    const stale = await signJwt(
      next,
      'host+jwt',
      { iss: a.host.thumbprint, aud: p.issuer },
      { nowMs: p.clock.now() },
    );
    expectError(
      await p.request('GET', `/agent/status?agent_id=${a.agentId}`, { token: stale }),
      401,
      'invalid_jwt',
      /Unknown host/,
    );
    expect((await p.status(next, a.agentId)).status).toBe(200);
    // Agent JWTs: the old host iss is refused, the new one (or none) accepted.
    const agent = { ...a, host: next };
    expectError(
      await p.request('GET', '/capability/list', {
        token: await agentToken({ claims: { iss: a.host.thumbprint } }, agent),
      }),
      401,
      'invalid_jwt',
      /iss/,
    );
    const fresh = await agentToken({ claims: { iss: next.thumbprint } }, agent);
    expect((await p.request('GET', '/capability/list', { token: fresh })).status).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------------
// SDK interop (README) and the order of checks

describe('SDK interop (README "Interoperability with the reference SDK")', () => {
  it('a host JWT whose kid is its own thumbprint is accepted', async () => {
    const token = await p.hostToken(fx.host, {}, { kid: fx.host.thumbprint });
    expect((await p.request('GET', `/agent/status?agent_id=${fx.agentId}`, { token })).status).toBe(200);
  });

  it('a host JWT with an arbitrary kid is accepted: kid is ignored, the key is the stored one', async () => {
    const token = await p.hostToken(fx.host, {}, { kid: 'whatever' });
    expect((await p.request('GET', `/agent/status?agent_id=${fx.agentId}`, { token })).status).toBe(200);
  });

  it('a host JWT with a non-string kid → 401 invalid_jwt', async () => {
    const token = await p.hostToken(fx.host, {}, { kid: 42 });
    expectError(
      await p.request('GET', `/agent/status?agent_id=${fx.agentId}`, { token }),
      401,
      'invalid_jwt',
      /kid/,
    );
  });

  describe('a pending host (§2.11, §4.5.1 step 8)', () => {
    let pending: { host: TestKey; agent: TestKey; agentId: string };

    beforeAll(async () => {
      const host = await generateTestKey();
      const reg = await p.register(host, { name: 'pending', capabilities: ['list_pets'] });
      if (reg.status !== 200 || reg.body.status !== 'pending') throw new Error(JSON.stringify(reg.body));
      pending = { host, agent: reg.agent, agentId: reg.body.agent_id };
    });

    it('may read the status of its own agent', async () => {
      const reply = await p.status(pending.host, pending.agentId);
      expect(reply.status).toBe(200);
      expect(reply.body).toMatchObject({ agent_id: pending.agentId, status: 'pending' });
    });

    it('may register another agent', async () => {
      const reply = await p.register(pending.host, { name: 'second' });
      expect(reply.status).toBe(200);
      expect(reply.body.status).toBe('pending');
    });

    it("cannot read another host's agent → 403 unauthorized", async () => {
      expectError(await p.status(pending.host, fx.agentId), 403, 'unauthorized');
    });

    it("cannot have its agent's status read by another host → 403 unauthorized", async () => {
      expectError(await p.status(fx.host, pending.agentId), 403, 'unauthorized');
    });

    it('its agent cannot request capabilities → 403 host_pending', async () => {
      const reply = await p.request('POST', '/agent/request-capability', {
        token: await p.agentToken(pending.agent, pending.agentId),
        body: { capabilities: ['get_pet'] },
      });
      expectError(reply, 403, 'host_pending');
    });

    it('its agent cannot list with grant status → 403 host_pending', async () => {
      const reply = await p.request('GET', '/capability/list', {
        token: await p.agentToken(pending.agent, pending.agentId),
      });
      expectError(reply, 403, 'host_pending');
    });

    it.each([
      [
        'POST /host/rotate-key',
        '/host/rotate-key',
        async () => ({ public_key: (await generateTestKey()).publicJwk }),
      ],
      ['POST /host/revoke', '/host/revoke', () => Promise.resolve({})],
      ['POST /agent/revoke', '/agent/revoke', () => Promise.resolve({ agent_id: pending.agentId })],
      ['POST /agent/reactivate', '/agent/reactivate', () => Promise.resolve({ agent_id: pending.agentId })],
      [
        'POST /agent/rotate-key',
        '/agent/rotate-key',
        async () => ({ agent_id: pending.agentId, public_key: (await generateTestKey()).publicJwk }),
      ],
    ])('%s → 403 host_pending', async (_name, path, body) => {
      const reply = await p.request('POST', path, {
        token: await p.hostToken(pending.host),
        body: await body(),
      });
      expectError(reply, 403, 'host_pending');
    });

    it('after all that, the host and its agent are unchanged (still pending, same key)', async () => {
      const reply = await p.status(pending.host, pending.agentId);
      expect(reply.status).toBe(200);
      expect(reply.body.status).toBe('pending');
    });
  });
});

describe('the signature is checked before any stored state is revealed', () => {
  it('a revoked agent: bad signature → 401 invalid_jwt; good signature → 403 agent_revoked', async () => {
    const a = await p.activeAgent(['list_pets']);
    const revoke = await p.request('POST', '/agent/revoke', {
      token: await p.hostToken(a.host),
      body: { agent_id: a.agentId },
    });
    expect(revoke.status).toBe(200);
    const forged = await agentToken({ signer: await generateTestKey() }, a);
    expectError(
      await p.request('GET', '/capability/list', { token: forged }),
      401,
      'invalid_jwt',
      /signature/,
    );
    const genuine = await agentToken({}, a);
    expectError(await p.request('GET', '/capability/list', { token: genuine }), 403, 'agent_revoked');
  });

  it('an agent of a pending host: bad signature → 401 invalid_jwt; good signature → 403 host_pending', async () => {
    const host = await generateTestKey();
    const reg = await p.register(host, { capabilities: ['list_pets'] });
    expect(reg.body.status).toBe('pending');
    const who = { host, hostId: '', agent: reg.agent, agentId: reg.body.agent_id as string };
    const forged = await agentToken({ signer: host }, who);
    expectError(
      await p.request('GET', '/capability/list', { token: forged }),
      401,
      'invalid_jwt',
      /signature/,
    );
    const genuine = await agentToken({}, who);
    expectError(await p.request('GET', '/capability/list', { token: genuine }), 403, 'host_pending');
  });

  it('a revoked host: bad signature → 401 invalid_jwt; good signature → 403 host_revoked', async () => {
    const a = await p.activeAgent(['list_pets']);
    const revoke = await p.request('POST', '/host/revoke', { token: await p.hostToken(a.host), body: {} });
    expect(revoke.status).toBe(200);
    const forged = await signJwt(
      await generateTestKey(),
      'host+jwt',
      { iss: a.host.thumbprint, aud: p.issuer },
      { nowMs: p.clock.now() },
    );
    const path = `/agent/status?agent_id=${a.agentId}`;
    expectError(await p.request('GET', path, { token: forged }), 401, 'invalid_jwt', /signature/);
    expectError(await p.status(a.host, a.agentId), 403, 'host_revoked');
    // Its agents are revoked with it (§8.5), and a forged agent JWT still learns nothing.
    const agentForged = await agentToken({ signer: await generateTestKey() }, a);
    expectError(
      await p.request('GET', '/capability/list', { token: agentForged }),
      401,
      'invalid_jwt',
      /signature/,
    );
    expectError(
      await p.request('GET', '/capability/list', { token: await agentToken({}, a) }),
      403,
      'host_revoked',
    );
  });

  it("a forged agent JWT naming a foreign host's iss learns nothing about which host owns the agent", async () => {
    const forged = await agentToken({
      signer: await generateTestKey(),
      claims: { iss: other.host.thumbprint },
    });
    expectError(
      await p.request('GET', '/capability/list', { token: forged }),
      401,
      'invalid_jwt',
      /signature/,
    );
  });
});
