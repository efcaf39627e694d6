/**
 * §5.12 introspection: the full §4.5 verification, answered as `{active}` (RFC 7662 style). Every
 * failure is `{ "active": false }` — the caller learns no reason, so it cannot probe agents.
 */
import { ProtocolError } from '../errors.js';
import { acceptAgent, verifyAgentJwt } from './authenticate.js';
import { iso, type ProtocolContext } from './context.js';
import { boundKey } from './dpop.js';
import { cachedGrants, currentGrants, inoperativeReason, loadGrants } from './grants.js';
import { agentClocks, isGrantEffective } from './lifecycle.js';

export async function introspect(ctx: ProtocolContext, token: unknown): Promise<Record<string, unknown>> {
  if (typeof token !== 'string' || token === '')
    throw new ProtocolError('invalid_request', 'token is required.');
  let auth;
  let jkt;
  try {
    // Resource servers receive tokens addressed to the execute location or to the issuer (§4.3).
    auth = await verifyAgentJwt(ctx, token, [ctx.issuer(), ctx.executeLocation()]);
    // Introspection uses the token up, as execution would (§4.6): it cannot be replayed after.
    await acceptAgent(ctx, auth);
    // RFC 9449 §6.2: a bound token's key, for the resource server to check its DPoP proofs with.
    jkt = boundKey(auth.claims.cnf);
  } catch (err) {
    if (err instanceof ProtocolError && err.code !== 'temporarily_unavailable') return { active: false };
    throw err;
  }
  const { agent, host, claims } = auth;
  const now = ctx.clock.now();
  const restrict = Array.isArray(claims.capabilities) ? new Set(claims.capabilities) : undefined;
  const held = cachedGrants(ctx, agent.id) ?? (await loadGrants(ctx, agent.id));
  const grants = currentGrants(held)
    .filter((g) => g.status === 'pending' || isGrantEffective(g, now) || g.status === 'denied')
    .filter((g) => !restrict || restrict.has(g.capability))
    // §4.5: what policy requires a proven JWT for is not this token's to use when it is unbound.
    .filter((g) => jkt !== undefined || !ctx.policy.dpop.has(g.capability))
    // §2.12: a removed or blocked capability's grant is not active for a resource server either.
    .map((g) => ({
      capability: g.capability,
      status:
        isGrantEffective(g, now) && inoperativeReason(ctx, g.capability) === undefined
          ? 'active'
          : g.status === 'pending'
            ? 'pending'
            : 'denied',
    }));
  const expiresAt = agentClocks(ctx, agent).expiresAt;
  return {
    active: true,
    agent_id: agent.id,
    host_id: host.id,
    ...(agent.userId ? { user_id: agent.userId } : {}),
    agent_capability_grants: grants,
    mode: agent.mode,
    ...(expiresAt !== null ? { expires_at: iso(expiresAt) } : {}),
    ...(jkt !== undefined ? { cnf: { jkt } } : {}),
  };
}
