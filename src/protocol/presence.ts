/**
 * §8.11 proof of presence at approval. An agent that drives the user's browser can sign in again
 * with a saved password and click Approve; it cannot pass a platform authenticator's fingerprint,
 * face or PIN check. So approving anything that can change data or act for the user needs a
 * WebAuthn assertion with `userVerification: "required"` from one of the approver's passkeys,
 * bound to this approval and to what the page showed; read-only grants may use the weaker
 * methods (fresh sign-in). Policy `approval.require_presence: always` asks it for every approval.
 */
import { createHash } from 'node:crypto';
import type { Policy } from './resolved-policy.js';
import { isReadOnlyMethod } from './device.js';
import type { AssertionResult, CeremonyScope, Passkeys } from './passkeys.js';

export type PresenceRule = Policy['approval']['requirePresence'];

/** What the rule looks at in each capability being approved. */
export interface PresenceSubject {
  readonly name: string;
  /** The upstream HTTP method, upper case; null when unknown (treated as changing data). */
  readonly method: string | null;
  /** Policy `capabilities.high_risk`. */
  readonly highRisk: boolean;
}

/** The capabilities among `approving` that need presence under `rule` (every one with `always`). */
export function capabilitiesNeedingPresence(
  approving: readonly PresenceSubject[],
  rule: PresenceRule,
): string[] {
  return approving
    .filter((c) => rule === 'always' || c.highRisk || !isReadOnlyMethod(c.method))
    .map((c) => c.name);
}

/** Whether approving `approving` needs a passkey assertion; with `always`, even approving none. */
export function presenceRequired(approving: readonly PresenceSubject[], rule: PresenceRule): boolean {
  return rule === 'always' || capabilitiesNeedingPresence(approving, rule).length > 0;
}

/**
 * Form fields that are not part of the decision: the CSRF token, the WebAuthn answers themselves,
 * and a re-entered password.
 */
const NOT_DECIDED = new Set(['csrf', 'assertion', 'registration', 'password', 'totp']);

/**
 * A hash of the form's decided fields, in a canonical order: what an assertion (or an enrolment)
 * is bound to besides its purpose.
 */
export function formFieldsHash(fields: Iterable<readonly [string, string]>): string {
  const decided = [...fields]
    .filter(([name]) => !NOT_DECIDED.has(name))
    .map(([name, value]) => JSON.stringify([name, value]))
    .sort();
  return createHash('sha256')
    .update(`[${decided.join(',')}]`)
    .digest('base64url');
}

/**
 * What an approval's assertion is bound to: the approval, the hash of the request as the page
 * showed it, and every other field of the approve form (which capabilities, narrowed constraints,
 * an expiry: whatever the form decides). The same form sent with the assertion must give the
 * same binding, so an assertion approves exactly what the person confirmed and nothing else.
 */
export function approvalBinding(
  approvalId: string,
  contentHash: string,
  fields: Iterable<readonly [string, string]>,
): string {
  return `approve ${approvalId} ${contentHash} ${formFieldsHash(fields)}`;
}

/** The scope of an approval's ceremony: this session, this approver, this binding. */
export function presenceScope(sessionIdHash: string, userId: string, binding: string): CeremonyScope {
  return { purpose: 'approve', owner: `session:${sessionIdHash}`, userId, binding };
}

/** Verifies the approver's assertion for exactly this approval and form. */
export function verifyPresence(
  passkeys: Passkeys,
  scope: CeremonyScope,
  assertion: string,
): Promise<AssertionResult> {
  return passkeys.verifyAssertion(scope, assertion);
}
