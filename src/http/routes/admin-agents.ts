/** The operator's agents: listing (lifetime clocks applied, §2.4), one agent, revocation (§5.7). */
import { ProtocolError } from '../../errors.js';
import { revokeAgent } from '../../protocol/agents.js';
import { iso, type ProtocolContext } from '../../protocol/context.js';
import { currentAgent } from '../../protocol/lifecycle.js';
import { agentView } from '../../protocol/views.js';
import type { AgentRecord } from '../../storage/types.js';
import { nextCursor, pageOf } from '../listing-page.js';
import { sendJson } from '../respond.js';
import type { Router } from '../router.js';
import { ACTOR, type AdminSteps } from './admin-steps.js';

export function adminAgentRoutes(router: Router, ctx: ProtocolContext, steps: AdminSteps): void {
  router.add(
    'GET',
    '/admin/agents',
    steps.read('list-agents', async ({ res, url }) => {
      const hostId = url.searchParams.get('host_id') ?? undefined;
      const status = url.searchParams.get('status') ?? undefined;
      const userId = url.searchParams.get('user_id') ?? undefined;
      // Lifetime clocks applied first (§2.4), so an agent past its TTL shows as expired here too.
      const page = pageOf(url);
      const stored = await ctx.store.agents({
        ...(hostId ? { hostId } : {}),
        ...(userId ? { userId } : {}),
        ...page,
      });
      const current: AgentRecord[] = [];
      for (const a of stored) current.push(await currentAgent(ctx, a));
      const agents = current.filter((a) => !status || a.status === status);
      sendJson(res, 200, {
        ...nextCursor(stored, page.limit),
        agents: agents.map((a) => ({
          agent_id: a.id,
          host_id: a.hostId,
          name: a.name,
          status: a.status,
          mode: a.mode,
          user_id: a.userId,
          created_at: iso(a.createdAt),
        })),
      });
    }),
  );

  router.add(
    'GET',
    '/admin/agents/:id',
    steps.read('show-agent', async ({ res, params }) => {
      const stored = await ctx.store.agent(params.id ?? '');
      if (!stored) throw new ProtocolError('agent_not_found', `No agent "${params.id ?? ''}".`);
      const agent = await currentAgent(ctx, stored);
      const grants = await ctx.store.grants(agent.id);
      sendJson(res, 200, agentView(ctx, agent, grants, await ctx.store.host(agent.hostId), { audit: true }));
    }),
  );

  router.add(
    'POST',
    '/admin/agents/:id/revoke',
    steps.change('revoke-agent', async (rc) => {
      sendJson(rc.res, 200, await revokeAgent(ctx, rc.params.id ?? '', { by: ACTOR }));
    }),
  );
}
