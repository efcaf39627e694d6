/**
 * A software WebAuthn authenticator (ES256, "none" attestation) for unit tests of the server
 * side: it builds the same JSON a browser sends (`@simplewebauthn/browser`'s shape), with real
 * P-256 signatures, and lets a test set the flags and counter an attacker would control. The
 * browser tests use Chromium's virtual authenticator instead.
 */
import { createHash, randomBytes, sign, type KeyObject } from 'node:crypto';
import { isoCBOR } from '@simplewebauthn/server/helpers';
import { newKeyPair } from '../../src/util/key-pair.js';

const UP = 0x01;
const UV = 0x04;
const AT = 0x40;

export interface CeremonyInput {
  readonly challenge: string;
  readonly rpId: string;
  readonly origin: string;
  /** User verification flag (default true). */
  readonly uv?: boolean;
}

export class SoftAuthenticator {
  readonly credentialId: Buffer;
  readonly userHandle: string | undefined;
  counter = 0;
  readonly #privateKey: KeyObject;
  readonly #publicKey: KeyObject;

  constructor(userHandle?: string, credentialId: Buffer = randomBytes(16)) {
    this.credentialId = credentialId;
    const { privateKey, publicKey } = newKeyPair('ec', { namedCurve: 'P-256' });
    this.#privateKey = privateKey;
    this.#publicKey = publicKey;
    this.userHandle = userHandle;
  }

  get id(): string {
    return this.credentialId.toString('base64url');
  }

  /** The COSE-encoded public key, as the server stores it after enrolment. */
  cosePublicKey(): Uint8Array {
    const jwk = this.#publicKey.export({ format: 'jwk' });
    return isoCBOR.encode(
      new Map<number, number | Uint8Array>([
        [1, 2],
        [3, -7],
        [-1, 1],
        [-2, new Uint8Array(Buffer.from(jwk.x ?? '', 'base64url'))],
        [-3, new Uint8Array(Buffer.from(jwk.y ?? '', 'base64url'))],
      ]),
    );
  }

  /** `navigator.credentials.create()`'s answer, as JSON text. */
  register(input: CeremonyInput): string {
    const cose = this.cosePublicKey();
    const idLength = Buffer.alloc(2);
    idLength.writeUInt16BE(this.credentialId.length);
    const authData = Buffer.concat([
      this.#head(input, AT),
      Buffer.alloc(16),
      idLength,
      this.credentialId,
      Buffer.from(cose),
    ]);
    const attestationObject = isoCBOR.encode(
      new Map<string, string | Uint8Array | Map<string, string>>([
        ['fmt', 'none'],
        ['attStmt', new Map<string, string>()],
        ['authData', new Uint8Array(authData)],
      ]),
    );
    return JSON.stringify({
      id: this.id,
      rawId: this.id,
      type: 'public-key',
      clientExtensionResults: {},
      response: {
        clientDataJSON: clientData('webauthn.create', input),
        attestationObject: Buffer.from(attestationObject).toString('base64url'),
        transports: ['internal'],
      },
    });
  }

  /** `navigator.credentials.get()`'s answer, as JSON text; the counter moves on first. */
  assert(input: CeremonyInput): string {
    this.counter++;
    const authData = this.#head(input, 0);
    const clientDataJSON = clientData('webauthn.get', input);
    const signed = Buffer.concat([
      authData,
      createHash('sha256').update(Buffer.from(clientDataJSON, 'base64url')).digest(),
    ]);
    return JSON.stringify({
      id: this.id,
      rawId: this.id,
      type: 'public-key',
      clientExtensionResults: {},
      response: {
        clientDataJSON,
        authenticatorData: authData.toString('base64url'),
        signature: sign('sha256', signed, this.#privateKey).toString('base64url'),
        ...(this.userHandle ? { userHandle: this.userHandle } : {}),
      },
    });
  }

  #head(input: CeremonyInput, extra: number): Buffer {
    const counter = Buffer.alloc(4);
    counter.writeUInt32BE(this.counter);
    const flags = UP | (input.uv === false ? 0 : UV) | extra;
    return Buffer.concat([createHash('sha256').update(input.rpId).digest(), Buffer.from([flags]), counter]);
  }
}

function clientData(type: string, input: CeremonyInput): string {
  return Buffer.from(
    JSON.stringify({ type, challenge: input.challenge, origin: input.origin, crossOrigin: false }),
  ).toString('base64url');
}
