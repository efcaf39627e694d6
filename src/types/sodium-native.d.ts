/**
 * The one function of sodium-native (libsodium's Node binding, which ships no types) that the
 * proxy uses: src/protocol/ed25519.ts.
 */
declare module 'sodium-native' {
  const sodium: {
    /** libsodium's crypto_sign_verify_detached (RFC 8032 §5.1.7): true when the signature is valid. */
    crypto_sign_verify_detached(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean;
  };
  export = sodium;
}
