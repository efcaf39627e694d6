/**
 * One-time enrolment codes for a person's first passkey (`sign_in.first_passkey: operator_code`).
 * A fresh sign-in alone lets whoever holds a saved password (an agent driving the browser, §8.11)
 * enrol an authenticator of its own as the first passkey. With this setting the first passkey also
 * needs a code the operator gave the person out of band (in person, by phone): the operator API
 * issues it (protocol/operator-users.ts), the store keeps only its SHA-256, and enrolling takes
 * it in the same transaction as the new passkey, so it works once.
 *
 * 16 characters of a 30-letter alphabet without look-alikes (no 0/O, 1/I/L, U): about 78 bits,
 * so guessing is hopeless even before the per-IP limits; typed with or without the dashes, in any
 * case.
 */
import { createHash, randomInt } from 'node:crypto';

const ALPHABET = 'ABCDEFGHJKMNPQRSTVWXYZ23456789';
const LENGTH = 16;
const CODE = new RegExp(`^[${ALPHABET}]{${LENGTH}}$`);

/** How long a code is good for unless the operator says otherwise, and at most. */
export const ENROLMENT_CODE_TTL_MS = 24 * 3600_000;
export const MAX_ENROLMENT_CODE_TTL_MS = 7 * 24 * 3600_000;

/** A new code, as shown to the operator: `ABCD-EFGH-JKMN-PQRS`. */
export function newEnrolmentCode(): string {
  const letters = Array.from({ length: LENGTH }, () => ALPHABET[randomInt(ALPHABET.length)] as string);
  return letters.join('').replace(/(.{4})(?=.)/g, '$1-');
}

/** The stored form of a code as typed (case, spaces and dashes ignored); undefined if it cannot be one. */
export function enrolmentCodeHash(typed: string): string | undefined {
  const code = typed.toUpperCase().replace(/[\s-]/g, '');
  if (!CODE.test(code)) return undefined;
  return createHash('sha256').update(code).digest('base64url');
}
