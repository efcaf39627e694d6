/**
 * Agent- and host-authenticated protocol endpoints: §5.3–§5.10 and §5.12. Each route is its list
 * of steps: token → limits → replay record → body → the protocol action → the answer.
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
import type { ProtocolContext } from '../../protocol/context.js';
import { revokeHost, rotateHostKey } from '../../protocol/hosts.js';
import { introspect } from '../../protocol/introspect.js';
import { registerAgent } from '../../protocol/registration.js';
import { cleanUserAgent } from '../../protocol/decision-record.js';
import { need, step, type Exchange } from '../pipeline.js';
import type { RateLimits } from '../rate-limits.js';
import { sendJson, type Settled } from '../respond.js';
import type { Router } from '../router.js';
import { jsonBody } from '../steps/body.js';
import { perIp, principalLimits } from '../steps/limits.js';
import { replayRecord } from '../steps/replay.js';
import { agentToken, hostToken, secretToken, type TokenStepOptions } from '../steps/tokens.js';

export interface ProtocolRouteOptions extends TokenStepOptions {
  readonly ctx: ProtocolContext;
  readonly limits: RateLimits;
  readonly maxBodyBytes: number;
  /** Secrets that may call introspection (§5.12: server-to-server authentication). */
  readonly introspectionTokens: readonly string[];
}

const answer = <T>(x: Exchange, body: Settled<T>): void => {
  sendJson(x.res, 200, body);
};

export function agentRoutes(router: Router, options: ProtocolRouteOptions): void {
  const { ctx, limits, maxBodyBytes } = options;
  const host = (x: Exchange) => need(x.host, 'host');
  const agent = (x: Exchange) => need(x.agent, 'agent');
  const body = (x: Exchange) => need(x.body, 'body');
  // The host-authenticated tail every host endpoint shares.
  const asHost = [hostToken(options), principalLimits(limits), replayRecord(ctx), jsonBody(maxBodyBytes)];

  router.add('POST', '/agent/register', [
    // §8.13: unknown hosts registering are the abuse case; they get a tight per-IP budget.
    hostToken(options, { allowUnknown: true, allowPending: true }),
    principalLimits(limits, 'registration'),
    replayRecord(ctx),
    jsonBody(maxBodyBytes),
    step('register', async (x) =>
      answer(
        x,
        await registerAgent(ctx, host(x), body(x), {
          ip: x.clientIp,
          userAgent: cleanUserAgent(x.req.headers['user-agent']),
        }),
      ),
    ),
  ]);

  router.add('POST', '/agent/request-capability', [
    agentToken(options),
    principalLimits(limits),
    replayRecord(ctx),
    jsonBody(maxBodyBytes),
    step('request-capability', async (x) => {
      answer(x, await requestCapability(ctx, agent(x), body(x)));
    }),
  ]);

  router.add('GET', '/agent/status', [
    // A pending host may poll its own agents (reference SDK flow, §5.3, §7.1), a rejected one too.
    hostToken(options, { allowPending: true, allowRejected: true }),
    principalLimits(limits),
    replayRecord(ctx),
    step('status', async (x) => {
      const agentId = x.url.searchParams.get('agent_id');
      if (!agentId) throw new ProtocolError('invalid_request', 'The agent_id query parameter is required.');
      answer(x, await agentStatus(ctx, host(x), agentId));
    }),
  ]);

  router.add('POST', '/agent/reactivate', [
    ...asHost,
    step('reactivate', async (x) => {
      answer(x, await reactivate(ctx, host(x), body(x)));
    }),
  ]);

  router.add('POST', '/agent/revoke', [
    ...asHost,
    step('revoke', async (x) => {
      const revoked = await revokeAgent(ctx, requireAgentId(body(x)), {
        hostId: host(x).host?.id ?? '',
        by: 'host',
      });
      answer(x, revoked);
    }),
  ]);

  router.add('POST', '/agent/rotate-key', [
    ...asHost,
    step('rotate-key', async (x) => answer(x, await rotateAgentKey(ctx, host(x), body(x)))),
  ]);

  router.add('POST', '/host/rotate-key', [
    ...asHost,
    step('rotate-host-key', async (x) => answer(x, await rotateHostKey(ctx, host(x), body(x)))),
  ]);

  router.add('POST', '/host/revoke', [
    hostToken(options),
    principalLimits(limits),
    replayRecord(ctx),
    jsonBody(maxBodyBytes, { optional: true }),
    step('revoke-host', async (x) => {
      answer(x, await revokeHost(ctx, host(x).host?.id ?? '', 'host'));
    }),
  ]);

  router.add('POST', '/agent/introspect', [
    // §5.12: server-to-server; the caller is an operator's resource server, limited per IP first
    // so that guessing the secret is limited too.
    perIp(limits),
    secretToken(options, 'introspection token', options.introspectionTokens),
    jsonBody(maxBodyBytes),
    step('introspect', async (x) => answer(x, await introspect(ctx, body(x).token))),
  ]);
}
