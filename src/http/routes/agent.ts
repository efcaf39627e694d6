/**
 * Agent- and host-authenticated protocol endpoints: §5.3–§5.10 and §5.12. Each handler reads
 * the request, authenticates, rate-limits, and hands over to src/protocol.
 */
import { ProtocolError } from '../../errors.js';
import {
  agentStatus,
  reactivate,
  requestCapability,
  requireAgentId,
  revokeAgent,
  rotateAgentKey,
} from '../../protocol/agents.js';
import { authenticateAgent, authenticateHost, type HostAuthOptions } from '../../protocol/authenticate.js';
import type { ProtocolContext } from '../../protocol/context.js';
import { revokeHost, rotateHostKey } from '../../protocol/hosts.js';
import { introspect } from '../../protocol/introspect.js';
import { registerAgent } from '../../protocol/registration.js';
import { readJsonObject } from '../body.js';
import { bearerToken, secretEquals, requireBearer } from '../credentials.js';
import type { RateLimits } from '../rate-limits.js';
import { sendJson } from '../respond.js';
import type { RequestContext, Router } from '../router.js';

export interface ProtocolRouteOptions {
  readonly ctx: ProtocolContext;
  readonly limits: RateLimits;
  readonly maxBodyBytes: number;
  /** Secrets that may call introspection (§5.12: server-to-server authentication). */
  readonly introspectionTokens: readonly string[];
}

export function agentRoutes(router: Router, options: ProtocolRouteOptions): void {
  const { ctx, limits, maxBodyBytes } = options;

  const host = async (rc: RequestContext, auth: HostAuthOptions = {}) => {
    const result = await authenticateHost(ctx, requireBearer(rc.req), auth);
    if (result.host) limits.host(result.host.id);
    return result;
  };

  router.add('POST', '/agent/register', async (rc) => {
    const token = requireBearer(rc.req);
    const auth = await authenticateHost(ctx, token, { allowUnknown: true, allowPending: true });
    // §8.13: unknown hosts registering are the abuse case; they get a tight per-IP budget.
    if (auth.host) limits.host(auth.host.id);
    else limits.unknownHostRegistration(rc.req);
    const body = await readJsonObject(rc.req, maxBodyBytes);
    const result = await registerAgent(ctx, auth, body);
    sendJson(rc.res, result.status, result.body);
  });

  router.add('POST', '/agent/request-capability', async (rc) => {
    const auth = authenticateAgent(ctx, requireBearer(rc.req), [ctx.issuer()]);
    limits.agent(auth.agent.id, auth.host.id, auth.agent.userId);
    const body = await readJsonObject(rc.req, maxBodyBytes);
    sendJson(rc.res, 200, requestCapability(ctx, auth, body));
  });

  router.add('GET', '/agent/status', async (rc) => {
    // A pending host may poll its own agents (reference SDK flow, §5.3, §7.1).
    const auth = await host(rc, { allowPending: true, allowRejected: true });
    const agentId = rc.url.searchParams.get('agent_id');
    if (!agentId) throw new ProtocolError('invalid_request', 'The agent_id query parameter is required.');
    sendJson(rc.res, 200, agentStatus(ctx, auth, agentId));
  });

  router.add('POST', '/agent/reactivate', async (rc) => {
    const auth = await host(rc);
    const body = await readJsonObject(rc.req, maxBodyBytes);
    sendJson(rc.res, 200, reactivate(ctx, auth, body));
  });

  router.add('POST', '/agent/revoke', async (rc) => {
    const auth = await host(rc);
    const body = await readJsonObject(rc.req, maxBodyBytes);
    const agentId = requireAgentId(body);
    sendJson(rc.res, 200, revokeAgent(ctx, agentId, { hostId: auth.host?.id ?? '', by: 'host' }));
  });

  router.add('POST', '/agent/rotate-key', async (rc) => {
    const auth = await host(rc);
    const body = await readJsonObject(rc.req, maxBodyBytes);
    sendJson(rc.res, 200, await rotateAgentKey(ctx, auth, body));
  });

  router.add('POST', '/host/rotate-key', async (rc) => {
    const auth = await host(rc);
    const body = await readJsonObject(rc.req, maxBodyBytes);
    sendJson(rc.res, 200, await rotateHostKey(ctx, auth, body));
  });

  router.add('POST', '/host/revoke', async (rc) => {
    const auth = await host(rc);
    await readJsonObject(rc.req, maxBodyBytes, { optional: true });
    sendJson(rc.res, 200, revokeHost(ctx, auth.host?.id ?? '', 'host'));
  });

  router.add('POST', '/agent/introspect', async (rc) => {
    limits.ip(rc.req);
    const token = bearerToken(rc.req);
    if (!token) {
      throw new ProtocolError(
        'authentication_required',
        'Introspection needs "Authorization: Bearer <introspection token>".',
        {
          headers: { 'www-authenticate': 'Bearer' },
        },
      );
    }
    // Check every configured secret so the time taken does not reveal which one matched.
    const allowed = options.introspectionTokens.reduce((ok, t) => secretEquals(token, t) || ok, false);
    if (!allowed) {
      throw new ProtocolError('invalid_token', 'The introspection token is not valid.', {
        headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
      });
    }
    const body = await readJsonObject(rc.req, maxBodyBytes);
    sendJson(rc.res, 200, introspect(ctx, body.token));
  });
}
