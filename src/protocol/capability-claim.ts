/**
 * §4.3: an agent JWT's `capabilities` claim, when present, restricts that JWT to the names it
 * lists: "the server MUST reject requests for capabilities not in this list". That holds for
 * executing one (§4.5 step 11), for asking for one (§5.4): a token scoped to reading cannot
 * be used to ask a person for more, and for polling one's outcome (§5.11: async jobs and
 * per-call approvals).
 */
import { ProtocolError } from '../errors.js';
import type { AgentAuth } from './authenticate.js';
import type { ProtocolContext } from './context.js';
import { checkProofRequirement } from './dpop.js';

/** Refuses `name` when the JWT's `capabilities` claim is present and does not list it. */
export function checkCapabilityClaim(auth: AgentAuth, name: string): void {
  const claimed = auth.claims.capabilities;
  if (claimed === undefined) return;
  if (!Array.isArray(claimed) || !claimed.every((c) => typeof c === 'string')) {
    throw new ProtocolError('invalid_jwt', 'The capabilities claim must be an array of strings (§4.3).');
  }
  if (!claimed.includes(name)) {
    throw new ProtocolError(
      'capability_not_granted',
      `This JWT's capabilities claim does not include ${name} (§4.5).`,
    );
  }
}

/**
 * Whether this JWT may be used for capability `name` (executing it, or reading its outcome): its
 * `capabilities` claim lists it (§4.3), and it came with a DPoP proof when the policy's
 * `capabilities.dpop` lists it (§4.4, §4.5).
 */
export function checkTokenCovers(ctx: ProtocolContext, auth: AgentAuth, name: string): void {
  checkCapabilityClaim(auth, name);
  checkProofRequirement(ctx, auth, name);
}
