/**
 * Ed25519 signature verification (RFC 8032 §5.1.7) for every JWT of the protocol (§4.5), once
 * per request on the execute path, where it was the largest single cost: libsodium's verify
 * (sodium-native) takes about 39 µs of CPU on the benchmark VM, node:crypto's (OpenSSL 3) about
 * 65, because OpenSSL's Ed25519 does its field arithmetic in 32-bit limbs and libsodium in 64-bit
 * ones on x86-64 and arm64. README "Benchmarks" has the figures.
 *
 * Acceptance is never looser than OpenSSL's. Both require S < L (no malleable twin) and compare
 * the encoding of R; libsodium also refuses an R of small order, and a public key that is of
 * small order or not canonically encoded (keys.ts refuses those keys before any signature is
 * checked; here they are refused a second time). test/unit/protocol/ed25519.test.ts holds the two
 * to the same verdicts on RFC 8032's vectors and on random keys, messages and alterations.
 *
 * The native binding is loaded on first use (about 12 ms and 4 MiB): the CLI commands that verify
 * nothing (`check`, `capabilities`, the admin client) need not pay for it. `serve` loads it
 * before it listens (`loadEd25519`), so a binding that cannot load stops the start, not a request.
 */
import { createRequire } from 'node:module';
import { UserError } from '../errors.js';

type Sodium = typeof import('sodium-native');

const require = createRequire(import.meta.url);
let sodium: Sodium | undefined;

/** Loads libsodium now (once); a UserError says why it cannot be. */
export function loadEd25519(): Sodium {
  if (sodium !== undefined) return sodium;
  try {
    sodium = require('sodium-native') as Sodium;
  } catch (err) {
    throw new UserError(
      `Cannot load libsodium (the sodium-native package), which verifies every JWT's signature: ${(err as Error).message}`,
    );
  }
  return sodium;
}

const PUBLIC_KEY_BYTES = 32;
const SIGNATURE_BYTES = 64;

/** An Ed25519 public key (its 32 bytes), the only kind of key a JWT signature is checked with. */
export class Ed25519PublicKey {
  readonly #bytes: Buffer;

  /** `bytes`: the key's 32-byte encoding (RFC 8032 §5.1.5), copied. */
  constructor(bytes: Uint8Array) {
    if (bytes.length !== PUBLIC_KEY_BYTES) {
      throw new RangeError(`An Ed25519 public key is ${PUBLIC_KEY_BYTES} bytes, not ${bytes.length}.`);
    }
    this.#bytes = Buffer.from(bytes);
    Object.freeze(this);
  }

  /** True when `value` was made by this class (a look-alike object is not a key). */
  static isOne(value: unknown): value is Ed25519PublicKey {
    return typeof value === 'object' && value !== null && #bytes in value;
  }

  /** True when `signature` is this key's valid signature of `message`; false for anything else. */
  verify(message: Uint8Array, signature: Uint8Array): boolean {
    // Exactly 64 bytes: libsodium would check the first 64 of a longer one and ignore the rest.
    if (signature.length !== SIGNATURE_BYTES) return false;
    return (sodium ?? loadEd25519()).crypto_sign_verify_detached(signature, message, this.#bytes);
  }

  equals(other: Ed25519PublicKey): boolean {
    return this.#bytes.equals(other.#bytes);
  }
}
