import { createPublicKey, sign } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../../src/clock.js';
import {
  JwtError,
  MAX_JWT_BYTES,
  decodeJwt,
  replayHorizonMs,
  verifyJwt,
  type JwtPolicy,
  type JwtType,
  type UnverifiedJwt,
} from '../../../src/protocol/jwt.js';
import type { Ed25519PublicKey } from '../../../src/protocol/ed25519.js';
import { verificationKey } from '../../../src/protocol/keys.js';
import { newKeyPair } from '../../../src/util/key-pair.js';
import {
  agentJwt,
  encodeJson,
  generateTestKey,
  hmacJwt,
  hostJwt,
  signJwt,
  unsignedJwt,
  type TestKey,
} from '../../helpers/keys.js';

const ISSUER = 'https://auth.example.com';
const EXECUTE = 'https://auth.example.com/capability/execute';
const NOW = 1_710_000_000_000;
const NOW_SEC = NOW / 1000;
const POLICY: JwtPolicy = { clockSkewSec: 30, maxLifetimeSec: 60 };

/** A clock the test moves by hand. */
function fixedClock(ms = NOW): Clock & { ms: number } {
  return {
    ms,
    now() {
      return this.ms;
    },
  };
}

let host: TestKey;
let agent: TestKey;
let stranger: TestKey;

beforeAll(async () => {
  [host, agent, stranger] = await Promise.all([generateTestKey(), generateTestKey(), generateTestKey()]);
});

/** decodeJwt + verifyJwt as a route would call them. */
function check(
  token: string,
  options: { typ?: JwtType; key?: TestKey; audiences?: string[]; clock?: Clock; policy?: JwtPolicy } = {},
): Promise<Readonly<Record<string, unknown>>> {
  const typ = options.typ ?? 'host+jwt';
  const key = options.key ?? host;
  // A promise either way, so tests can say resolves/rejects whether a rule fails in decode or verify.
  return Promise.resolve().then(() =>
    verifyJwt(decodeJwt(token, typ), verificationKey(key.publicJwk), {
      typ,
      audiences: options.audiences ?? [ISSUER],
      clock: options.clock ?? fixedClock(),
      policy: options.policy ?? POLICY,
    }),
  );
}

async function rejects(
  token: string,
  pattern: RegExp,
  options: Parameters<typeof check>[1] = {},
): Promise<void> {
  const error: unknown = await check(token, options).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(JwtError);
  expect((error as JwtError).message).toMatch(pattern);
}

function hostClaims(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { iss: host.thumbprint, aud: ISSUER, iat: NOW_SEC, exp: NOW_SEC + 60, jti: 'j-1', ...extra };
}

function segments(token: string): [string, string, string] {
  return token.split('.') as [string, string, string];
}

/** Signs arbitrary header/payload with `key` (valid Ed25519 signature over whatever is given). */
function edSigned(key: TestKey, header: Record<string, unknown>, payload: Record<string, unknown>): string {
  const input = `${encodeJson(header)}.${encodeJson(payload)}`;
  return `${input}.${sign(null, Buffer.from(input), key.privateKey).toString('base64url')}`;
}

describe('valid tokens', () => {
  it('accepts a host JWT and returns its payload', async () => {
    const payload = await check(await hostJwt(host, ISSUER, {}, { nowMs: NOW }));
    expect(payload).toMatchObject({ iss: host.thumbprint, aud: ISSUER, iat: NOW_SEC, exp: NOW_SEC + 60 });
    expect(payload.host_public_key).toEqual(host.publicJwk);
    expect(typeof payload.jti).toBe('string');
  });

  it('accepts an agent JWT for the execute audience', async () => {
    const token = await agentJwt(agent, 'agt_1', EXECUTE, { iss: host.thumbprint }, { nowMs: NOW });
    const payload = await check(token, { typ: 'agent+jwt', key: agent, audiences: [ISSUER, EXECUTE] });
    expect(payload).toMatchObject({ sub: 'agt_1', aud: EXECUTE, iss: host.thumbprint });
  });

  it('accepts an aud array holding exactly the expected audience', async () => {
    const token = await hostJwt(host, ISSUER, { aud: [ISSUER] }, { nowMs: NOW });
    await expect(check(token)).resolves.toMatchObject({ iss: host.thumbprint });
  });

  it('accepts a kid header and fractional NumericDates', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims({ iat: NOW_SEC - 0.5, exp: NOW_SEC + 59.5 }), {
      header: { kid: 'key-1' },
    });
    expect(decodeJwt(token, 'host+jwt').header.kid).toBe('key-1');
    await expect(check(token)).resolves.toBeDefined();
  });

  it('decodeJwt exposes header and payload without verifying', async () => {
    const token = await signJwt(stranger, 'agent+jwt', { sub: 'agt_x', aud: ISSUER }, { nowMs: NOW });
    const decoded = decodeJwt(token, 'agent+jwt');
    expect(decoded.header).toEqual({ alg: 'EdDSA', typ: 'agent+jwt' });
    expect(decoded.payload.sub).toBe('agt_x');
    expect(decoded.token).toBe(token);
  });
});

describe('identifying claims', () => {
  it('refuses a control character in sub, iss, jti or kid before any lookup (PostgreSQL holds no NUL)', async () => {
    const cases: [Record<string, unknown>, Record<string, unknown>, string][] = [
      [{ sub: 'agt_\u0000x' }, {}, '"sub"'],
      [{ iss: 'host\u0000' }, {}, '"iss"'],
      [{ jti: 'j\u0007ti' }, {}, '"jti"'],
      [{ sub: 'agt\u007f' }, {}, '"sub"'],
      [{}, { kid: 'k\u0000' }, '"kid"'],
    ];
    for (const [claims, header, named] of cases) {
      const token = await signJwt(
        stranger,
        'agent+jwt',
        { sub: 'agt_x', aud: ISSUER, ...claims },
        { nowMs: NOW, header },
      );
      expect(() => decodeJwt(token, 'agent+jwt')).toThrow(JwtError);
      expect(() => decodeJwt(token, 'agent+jwt')).toThrow(named);
    }
    // Other characters, however unusual, are not control characters.
    const token = await signJwt(stranger, 'agent+jwt', { sub: 'agt_é\u00a0', aud: ISSUER }, { nowMs: NOW });
    expect(decodeJwt(token, 'agent+jwt').payload.sub).toBe('agt_é\u00a0');
  });
});

describe('typ (§4.5 step 1, §4.5.1 step 1)', () => {
  it('rejects an agent JWT where a host JWT is expected', async () => {
    const token = await agentJwt(host, 'agt_1', ISSUER, {}, { nowMs: NOW });
    await rejects(token, /typ.*host\+jwt/);
  });

  it('rejects a host JWT where an agent JWT is expected', async () => {
    const token = await hostJwt(agent, ISSUER, {}, { nowMs: NOW });
    await rejects(token, /typ.*agent\+jwt/, { typ: 'agent+jwt', key: agent });
  });

  it.each(['JWT', 'jwt', 'HOST+JWT', 'application/host+jwt', 'host+jwt ', 'at+jwt', '', null, 1])(
    'rejects typ %j',
    async (typ) => {
      const token = await signJwt(host, 'host+jwt', hostClaims(), { header: { typ } });
      await rejects(token, /typ/);
    },
  );

  it('rejects a missing typ', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims(), { header: { typ: undefined } });
    expect(decodeJwt.bind(null, token, 'agent+jwt')).toThrow(/typ/);
    await rejects(token, /typ/);
  });

  it('verifyJwt re-checks typ even when handed a token decoded for the other typ', async () => {
    const token = await agentJwt(host, 'agt_1', ISSUER, {}, { nowMs: NOW });
    const decoded = decodeJwt(token, 'agent+jwt');
    expect(() =>
      verifyJwt(decoded, verificationKey(host.publicJwk), {
        typ: 'host+jwt',
        audiences: [ISSUER],
        clock: fixedClock(),
        policy: POLICY,
      }),
    ).toThrow(/typ/);
  });

  it('a header checked once for one typ is still refused for the other (headers are remembered per typ)', async () => {
    const token = await agentJwt(host, 'agt_1', ISSUER, {}, { nowMs: NOW });
    expect(decodeJwt(token, 'agent+jwt').header.typ).toBe('agent+jwt');
    expect(() => decodeJwt(token, 'host+jwt')).toThrow(/typ.*host\+jwt/);
    expect(decodeJwt(token, 'agent+jwt').header.typ).toBe('agent+jwt');
  });

  it('a refused header is refused again on its next use (only checked headers are remembered)', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims(), { header: { crit: ['exp'] } });
    for (let i = 0; i < 2; i++) expect(() => decodeJwt(token, 'host+jwt')).toThrow(/crit/);
  });

  it('a decoded token cannot be altered into pairing its signature with other claims', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims(), { nowMs: NOW });
    const decoded = decodeJwt(token, 'host+jwt');
    expect(() => {
      (decoded as { payload: unknown }).payload = hostClaims({ sub: 'someone else' });
    }).toThrow(TypeError);
    expect(() => {
      (decoded.payload as Record<string, unknown>).aud = 'https://evil.example';
    }).toThrow(TypeError);
  });

  it('verifyJwt judges the claims in the token, not those of a hand-built object beside it', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims({ aud: 'https://evil.example' }), {
      nowMs: NOW,
    });
    const handBuilt: UnverifiedJwt = {
      header: { alg: 'EdDSA', typ: 'host+jwt' },
      payload: hostClaims(),
      token,
    };
    const options = { typ: 'host+jwt', audiences: [ISSUER], clock: fixedClock(), policy: POLICY } as const;
    expect(() => verifyJwt(handBuilt, verificationKey(host.publicJwk), options)).toThrow(/aud/);
  });
});

describe('alg (§4.1)', () => {
  it('rejects alg none with an empty signature', async () => {
    await rejects(unsignedJwt({ alg: 'none', typ: 'host+jwt' }, hostClaims()), /alg/);
  });

  it.each(['none', 'None', 'NONE'])('rejects alg %j even with a signature attached', async (alg) => {
    const [h, p] = segments(unsignedJwt({ alg, typ: 'host+jwt' }, hostClaims()));
    const [, , sig] = segments(await signJwt(host, 'host+jwt', hostClaims()));
    await rejects(`${h}.${p}.${sig}`, /alg/);
  });

  it('rejects EdDSA header with an empty signature', async () => {
    await rejects(unsignedJwt({ alg: 'EdDSA', typ: 'host+jwt' }, hostClaims()), /signature/);
  });

  it('rejects HS256 signed with the public key as the secret (algorithm confusion)', async () => {
    const header = { alg: 'HS256', typ: 'host+jwt' };
    const rawKey = Buffer.from(host.publicJwk.x, 'base64url');
    const pem = createPublicKey({ key: host.publicJwk, format: 'jwk' }).export({
      type: 'spki',
      format: 'pem',
    });
    for (const secret of [rawKey, host.publicJwk.x, JSON.stringify(host.publicJwk), pem]) {
      await rejects(hmacJwt(secret, header, hostClaims()), /alg/);
    }
  });

  it.each([
    'HS256',
    'HS512',
    'RS256',
    'PS256',
    'ES256',
    'ES384',
    'ES256K',
    'Ed25519',
    'Ed448',
    'eddsa',
    'EDDSA',
    '',
  ])('rejects alg %j on an otherwise valid Ed25519-signed token', async (alg) => {
    const token = await signJwt(host, 'host+jwt', hostClaims(), { header: { alg } });
    await rejects(token, /alg/);
  });

  it('rejects a missing alg', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims(), { header: { alg: undefined } });
    await rejects(token, /alg/);
  });

  it('verifyJwt still refuses forged algorithms when decodeJwt is bypassed', () => {
    const forged: UnverifiedJwt[] = [
      unsignedJwt({ alg: 'none', typ: 'host+jwt' }, hostClaims()),
      hmacJwt(Buffer.from(host.publicJwk.x, 'base64url'), { alg: 'HS256', typ: 'host+jwt' }, hostClaims()),
    ].map((token) => ({ header: { alg: 'EdDSA', typ: 'host+jwt' }, payload: hostClaims(), token }));
    for (const jwt of forged) {
      expect(() =>
        verifyJwt(jwt, verificationKey(host.publicJwk), {
          typ: 'host+jwt',
          audiences: [ISSUER],
          clock: fixedClock(),
          policy: POLICY,
        }),
      ).toThrow(JwtError);
    }
  });
});

describe('signature', () => {
  it('rejects a token signed by another key', async () => {
    const token = await signJwt(stranger, 'host+jwt', hostClaims());
    await rejects(token, /signature/);
  });

  it('rejects a tampered payload', async () => {
    const [h, , s] = segments(await signJwt(host, 'host+jwt', hostClaims()));
    await rejects(`${h}.${encodeJson(hostClaims({ iss: stranger.thumbprint }))}.${s}`, /signature/);
  });

  it('rejects a tampered header', async () => {
    const [, p, s] = segments(await signJwt(host, 'host+jwt', hostClaims()));
    await rejects(`${encodeJson({ alg: 'EdDSA', typ: 'host+jwt', kid: 'other' })}.${p}.${s}`, /signature/);
  });

  it('rejects a flipped signature bit', async () => {
    const [h, p, s] = segments(await signJwt(host, 'host+jwt', hostClaims()));
    const bytes = Buffer.from(s, 'base64url');
    bytes[0] = bytes[0]! ^ 1;
    await rejects(`${h}.${p}.${bytes.toString('base64url')}`, /signature/);
  });

  it('rejects the malleable twin of a valid signature (S + L, RFC 8032 §5.1.7)', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims(), { nowMs: NOW });
    await expect(check(token)).resolves.toBeDefined();
    const [h, p, s] = segments(token);
    const sig = Buffer.from(s, 'base64url');
    // S is the little-endian scalar in bytes 32..63; S + L encodes the same point equation.
    const L = 2n ** 252n + 27742317777372353535851937790883648493n;
    let scalar = 0n;
    for (let i = 63; i >= 32; i--) scalar = (scalar << 8n) | BigInt(sig[i]!);
    let twin = scalar + L;
    for (let i = 32; i < 64; i++) {
      sig[i] = Number(twin & 0xffn);
      twin >>= 8n;
    }
    await rejects(`${h}.${p}.${sig.toString('base64url')}`, /signature/);
  });

  it('rejects a verification key that is not an Ed25519 public key', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims());
    const options = { typ: 'host+jwt', audiences: [ISSUER], clock: fixedClock(), policy: POLICY } as const;
    const ec = newKeyPair('ec', { namedCurve: 'P-256' }).publicKey;
    // Past the types (a caller in plain JavaScript, a cast): node KeyObjects, even the signer's
    // own Ed25519 keys, and an object that only looks like a key are all refused.
    const notKeys: unknown[] = [
      ec,
      host.privateKey,
      createPublicKey({ key: host.publicJwk, format: 'jwk' }),
      { verify: () => true, equals: () => true },
      Object.create(verificationKey(host.publicJwk)),
    ];
    for (const notKey of notKeys) {
      expect(() => verifyJwt(decodeJwt(token, 'host+jwt'), notKey as Ed25519PublicKey, options)).toThrow(
        /Ed25519/,
      );
    }
  });
});

describe('aud', () => {
  it('rejects a different audience', async () => {
    await rejects(await signJwt(host, 'host+jwt', hostClaims({ aud: 'https://evil.example' })), /aud/);
  });

  it('matches exactly, without URL normalisation', async () => {
    for (const aud of [`${ISSUER}/`, ISSUER.toUpperCase(), 'https://auth.example.com:443', ` ${ISSUER}`]) {
      await rejects(await signJwt(host, 'host+jwt', hostClaims({ aud })), /aud/);
    }
  });

  it('rejects an aud array without the issuer', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims({ aud: ['https://a.example', EXECUTE] }));
    await rejects(token, /aud/);
  });

  it.each([
    ['the issuer and another server', [ISSUER, 'https://other.example']],
    ['another server and the issuer', ['https://other.example', ISSUER]],
    ['the issuer twice', [ISSUER, ISSUER]],
    ['two accepted audiences', [ISSUER, EXECUTE]],
  ])('rejects an aud array naming this server besides others: %s', async (_name, aud) => {
    const token = await signJwt(host, 'host+jwt', hostClaims({ aud }));
    await rejects(token, /exactly one value/, { audiences: [ISSUER, EXECUTE] });
  });

  it('accepts a one-element aud array equal to any accepted audience', async () => {
    const token = await signJwt(agent, 'agent+jwt', { sub: 'agt_1', aud: [EXECUTE] }, { nowMs: NOW });
    await expect(
      check(token, { typ: 'agent+jwt', key: agent, audiences: [ISSUER, EXECUTE] }),
    ).resolves.toBeDefined();
  });

  it.each([
    ['missing', undefined],
    ['empty array', []],
    ['number', 1],
    ['object', { aud: ISSUER }],
    ['array with non-strings', [ISSUER, 1]],
    ['nested array', [[ISSUER]]],
  ])('rejects aud %s', async (_name, aud) => {
    await rejects(await signJwt(host, 'host+jwt', hostClaims({ aud })), /aud/);
  });

  it('rejects everything when no audience is expected', async () => {
    await rejects(await signJwt(host, 'host+jwt', hostClaims()), /aud/, { audiences: [] });
  });
});

describe('exp, iat and lifetime (§8.2)', () => {
  const at = (offsetSec: number): Clock => fixedClock(NOW + offsetSec * 1000);

  it('rejects a token expired beyond the skew', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims());
    await rejects(token, /expired/, { clock: at(60 + 31) });
  });

  it('accepts a token expired within the skew', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims());
    await expect(check(token, { clock: at(60 + 29) })).resolves.toBeDefined();
    await expect(check(token, { clock: fixedClock(NOW + 90_000 - 1) })).resolves.toBeDefined();
  });

  it('rejects at exactly exp + skew', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims());
    await rejects(token, /expired/, { clock: at(90) });
  });

  it('uses the policy skew', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims());
    const policy = { clockSkewSec: 5, maxLifetimeSec: 60 };
    await expect(check(token, { clock: at(64), policy })).resolves.toBeDefined();
    await rejects(token, /expired/, { clock: at(66), policy });
  });

  it('rejects iat 31 s in the future', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims({ iat: NOW_SEC + 31, exp: NOW_SEC + 91 }));
    await rejects(token, /iat.*future/);
  });

  it('accepts iat 29 s and 30 s in the future', async () => {
    for (const ahead of [29, 30]) {
      const token = await signJwt(
        host,
        'host+jwt',
        hostClaims({ iat: NOW_SEC + ahead, exp: NOW_SEC + ahead + 60 }),
      );
      await expect(check(token)).resolves.toBeDefined();
    }
  });

  it('rejects iat in the future by 30.001 s', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims({ iat: NOW_SEC + 30, exp: NOW_SEC + 90 }));
    await rejects(token, /future/, { clock: fixedClock(NOW - 1) });
  });

  it.each(['iat', 'exp'])('rejects a missing %s', async (claim) => {
    await rejects(await signJwt(host, 'host+jwt', hostClaims({ [claim]: undefined })), new RegExp(claim));
  });

  it.each([
    ['string', String(NOW_SEC)],
    ['null', null],
    ['boolean', true],
    ['array', [NOW_SEC]],
  ])('rejects a %s iat and exp', async (_name, value) => {
    await rejects(await signJwt(host, 'host+jwt', hostClaims({ iat: value })), /iat/);
    await rejects(await signJwt(host, 'host+jwt', hostClaims({ exp: value })), /exp/);
  });

  it('rejects a lifetime over the maximum and accepts exactly the maximum', async () => {
    await rejects(await signJwt(host, 'host+jwt', hostClaims({ exp: NOW_SEC + 61 })), /lifetime/);
    await rejects(await signJwt(host, 'host+jwt', hostClaims({ exp: NOW_SEC + 3600 })), /lifetime/);
    await expect(
      check(await signJwt(host, 'host+jwt', hostClaims({ exp: NOW_SEC + 60 }))),
    ).resolves.toBeDefined();
  });

  it('rejects exp not after iat', async () => {
    await rejects(await signJwt(host, 'host+jwt', hostClaims({ exp: NOW_SEC })), /after/);
    await rejects(await signJwt(host, 'host+jwt', hostClaims({ exp: NOW_SEC - 10 })), /after/);
  });

  it('rejects an nbf in the future and a non-numeric nbf', async () => {
    await rejects(await signJwt(host, 'host+jwt', hostClaims({ nbf: NOW_SEC + 31 })), /nbf/);
    await rejects(await signJwt(host, 'host+jwt', hostClaims({ nbf: 'soon' })), /nbf/);
    await expect(check(await signJwt(host, 'host+jwt', hostClaims({ nbf: NOW_SEC })))).resolves.toBeDefined();
  });
});

describe('jti (§4.6)', () => {
  it.each([
    ['missing', undefined],
    ['empty', ''],
    ['a number', 42],
    ['null', null],
    ['257 characters', 'j'.repeat(257)],
  ])('rejects a jti that is %s', async (_name, jti) => {
    await rejects(await signJwt(host, 'host+jwt', hostClaims({ jti })), /jti/);
  });

  it('accepts a 256-character jti', async () => {
    await expect(
      check(await signJwt(host, 'host+jwt', hostClaims({ jti: 'j'.repeat(256) }))),
    ).resolves.toBeDefined();
  });
});

describe('header hardening', () => {
  it.each([
    ['jku', 'https://evil.example/jwks.json'],
    ['jwk', { kty: 'OKP', crv: 'Ed25519', x: 'AAAA' }],
    ['x5u', 'https://evil.example/cert.pem'],
    ['x5c', ['MIIB']],
  ])('rejects a %s header (embedded or remote key)', async (name, value) => {
    await rejects(
      await signJwt(host, 'host+jwt', hostClaims(), { header: { [name]: value } }),
      new RegExp(name),
    );
  });

  it('rejects a self-signed token carrying its own key in a jwk header', async () => {
    const token = await signJwt(stranger, 'host+jwt', hostClaims(), { header: { jwk: stranger.publicJwk } });
    await rejects(token, /jwk/, { key: stranger });
  });

  it.each([[['exp']], [[]], ['b64']])('rejects crit %j', async (crit) => {
    await rejects(await signJwt(host, 'host+jwt', hostClaims(), { header: { crit } }), /crit/);
  });

  it('rejects a non-string or empty kid', async () => {
    await rejects(await signJwt(host, 'host+jwt', hostClaims(), { header: { kid: 7 } }), /kid/);
    await rejects(await signJwt(host, 'host+jwt', hostClaims(), { header: { kid: '' } }), /kid/);
  });
});

describe('structure', () => {
  it('rejects a token over 8 KiB', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims({ pad: 'x'.repeat(MAX_JWT_BYTES) }));
    await rejects(token, /exceeds/);
  });

  it('accepts a token just under 8 KiB', async () => {
    const base = await signJwt(host, 'host+jwt', hostClaims({ pad: '' }));
    // Each 3 payload bytes add 4 base64url characters.
    const pad = 'x'.repeat(Math.floor(((MAX_JWT_BYTES - base.length) * 3) / 4) - 3);
    const token = await signJwt(host, 'host+jwt', hostClaims({ pad }));
    expect(token.length).toBeLessThanOrEqual(MAX_JWT_BYTES);
    expect(token.length).toBeGreaterThan(MAX_JWT_BYTES - 8);
    await expect(check(token)).resolves.toBeDefined();
  });

  it.each(['', '.', '..', 'abc', 'a.b', 'a.b.c.d', 'a.b.c.d.e'])('rejects %j', async (token) => {
    await rejects(token, /./);
  });

  it('rejects a JWE-shaped token (five parts)', async () => {
    const [h, p, s] = segments(await signJwt(host, 'host+jwt', hostClaims()));
    await rejects(`${h}..${p}.${s}.`, /three parts/);
  });

  it('rejects malformed base64url in each segment', async () => {
    const [h, p, s] = segments(await signJwt(host, 'host+jwt', hostClaims()));
    const std = (segment: string): string => Buffer.from(segment, 'base64url').toString('base64');
    await rejects(`${std(h)}.${p}.${s}`, /header/);
    await rejects(`${h}=.${p}.${s}`, /header/);
    await rejects(`${h}.${p}!.${s}`, /payload/);
    await rejects(`${h}.${p} .${s}`, /payload/);
    await rejects(`${h}.${p}.${s}*`, /signature/);
    await rejects(`${h}.${p}.${s.slice(0, -1)}`, /signature/);
    await rejects(`${h}.${p}A.${s}`, /payload/); // 1 mod 4 length cannot be base64url
  });

  it('rejects headers and payloads that are not JSON objects', async () => {
    const [h, p, s] = segments(await signJwt(host, 'host+jwt', hostClaims()));
    const raw = (text: string): string => Buffer.from(text).toString('base64url');
    await rejects(`${raw('{"alg":"EdDSA"')}.${p}.${s}`, /header.*JSON/);
    await rejects(`${raw('["EdDSA"]')}.${p}.${s}`, /header.*object/);
    await rejects(`${raw('null')}.${p}.${s}`, /header.*object/);
    await rejects(`${h}.${raw('not json')}.${s}`, /payload.*JSON/);
    await rejects(`${h}.${Buffer.from([0x7b, 0xff, 0x7d]).toString('base64url')}.${s}`, /payload.*JSON/);
  });

  it.each([
    ['array', [1]],
    ['string', 'hello'],
    ['number', 1],
    ['null', null],
    ['boolean', true],
  ])('rejects a %s payload, even when validly signed', async (_name, payload) => {
    const header = encodeJson({ alg: 'EdDSA', typ: 'host+jwt' });
    const input = `${header}.${encodeJson(payload)}`;
    const token = `${input}.${sign(null, Buffer.from(input), host.privateKey).toString('base64url')}`;
    await rejects(token, /payload.*object/);
  });

  it('freezes the decoded header and payload', async () => {
    const decoded = decodeJwt(await signJwt(host, 'host+jwt', hostClaims()), 'host+jwt');
    expect(Object.isFrozen(decoded.header)).toBe(true);
    expect(Object.isFrozen(decoded.payload)).toBe(true);
  });

  it('throws JwtError from decodeJwt synchronously', () => {
    expect(() => decodeJwt('x.y.z', 'agent+jwt')).toThrow(JwtError);
    expect(() => decodeJwt(edSigned(host, { alg: 'EdDSA', typ: 'host+jwt' }, {}), 'agent+jwt')).toThrow(
      JwtError,
    );
  });
});

describe('replayHorizonMs (§8.2)', () => {
  it('is exp plus skew, in epoch milliseconds', () => {
    expect(replayHorizonMs({ exp: NOW_SEC + 60 }, POLICY)).toBe(NOW + 90_000);
    expect(replayHorizonMs({ exp: NOW_SEC + 30 }, { clockSkewSec: 5, maxLifetimeSec: 30 })).toBe(
      NOW + 35_000,
    );
  });

  it('covers every instant at which the token is still accepted', async () => {
    const token = await signJwt(host, 'host+jwt', hostClaims());
    const payload = await check(token);
    const horizon = replayHorizonMs(payload, POLICY);
    await expect(check(token, { clock: fixedClock(horizon - 1) })).resolves.toBeDefined();
    await rejects(token, /expired/, { clock: fixedClock(horizon) });
  });

  it('throws without a numeric exp', () => {
    expect(() => replayHorizonMs({}, POLICY)).toThrow(JwtError);
  });
});
