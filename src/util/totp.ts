/**
 * TOTP (RFC 6238 over RFC 4226 HOTP): HMAC-SHA1, 6 digits, 30-second steps, one step of clock
 * drift either way. Hand-written on node:crypto rather than a dependency: it is a dozen lines, the
 * RFC's test vectors pin it down, and a second-factor check should not pull in a package tree.
 * Codes are single-use: a step once accepted for a user is refused afterwards (RFC 6238 §5.2).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

const STEP_MS = 30_000;
const DIGITS = 6;
const DRIFT_STEPS = 1;

/** RFC 4648 base32 (the form authenticator apps show), spaces and padding ignored. */
export function decodeBase32(text: string): Buffer {
  const clean = text.replace(/[\s=]/g, '').toUpperCase();
  if (!/^[A-Z2-7]+$/.test(clean)) throw new RangeError('a TOTP secret is base32 (letters A-Z, digits 2-7)');
  let bits = 0;
  let value = 0;
  const out: number[] = [];
  for (const c of clean) {
    value = (value << 5) | 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'.indexOf(c);
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

/** RFC 4226 §5.3: the HOTP value of `counter`, `digits` long. */
export function hotp(key: Buffer, counter: number, digits = DIGITS): string {
  const msg = Buffer.alloc(8);
  msg.writeBigUInt64BE(BigInt(counter));
  const mac = createHmac('sha1', key).update(msg).digest();
  const offset = (mac[mac.length - 1] as number) & 0x0f;
  const binary = mac.readUInt32BE(offset) & 0x7fffffff;
  return String(binary % 10 ** digits).padStart(digits, '0');
}

export function totpStep(nowMs: number): number {
  return Math.floor(nowMs / STEP_MS);
}

/** When `step` stops matching any code (the last moment of its drift window): a used step is kept until then. */
export function totpStepEnd(step: number): number {
  return (step + DRIFT_STEPS + 1) * STEP_MS;
}

/**
 * The step `code` is valid for at `nowMs` (±1 step), or undefined. Every candidate is compared,
 * in constant time, so the answer's timing does not say which step matched.
 */
export function matchTotp(key: Buffer, code: string, nowMs: number): number | undefined {
  const given = Buffer.from(code.replace(/\s/g, ''));
  let matched: number | undefined;
  const now = totpStep(nowMs);
  for (let step = now - DRIFT_STEPS; step <= now + DRIFT_STEPS; step++) {
    const expected = Buffer.from(hotp(key, step));
    if (given.length === expected.length && timingSafeEqual(given, expected)) matched ??= step;
  }
  return matched;
}
