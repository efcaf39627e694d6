/**
 * The operator's hosts: listing, pre-registration (§2.11), one host with its first agents, linking
 * to a user and unlinking (§2.9), revocation (§5.10).
 */
import { ProtocolError } from '../../errors.js';
import type { ProtocolContext } from '../../protocol/context.js';
import {
  linkHostTo,
  parsePreRegistration,
  preRegisterHost,
  revokeHost,
  unlinkHost,
} from '../../protocol/hosts.js';
import { hostView } from '../../protocol/views.js';
import type { HostStatus } from '../../storage/types.js';
import { nextCursor, pageOf } from '../listing-page.js';
import { sendJson } from '../respond.js';
import type { Router } from '../router.js';
import { ACTOR, type AdminSteps } from './admin-steps.js';
import { MAX_USER_ID } from './admin-users.js';

/** Agents shown inline with one host (`GET /admin/hosts/:id`). */
const HOST_AGENTS_SHOWN = 100;

export function adminHostRoutes(router: Router, ctx: ProtocolContext, steps: AdminSteps): void {
  router.add(
    'GET',
    '/admin/hosts',
    steps.read('list-hosts', async ({ res, url }) => {
      const status = url.searchParams.get('status') ?? undefined;
      const userId = url.searchParams.get('user_id') ?? undefined;
      const page = pageOf(url);
      const hosts = await ctx.store.hosts({
        ...(status ? { status: status as HostStatus } : {}),
        ...(userId ? { userId } : {}),
        ...page,
      });
      sendJson(res, 200, { hosts: hosts.map(hostView), ...nextCursor(hosts, page.limit) });
    }),
  );

  router.add(
    'POST',
    '/admin/hosts',
    steps.change('pre-register-host', async (rc) => {
      const input = parsePreRegistration(steps.bodyOf(rc));
      const { host, created } = await preRegisterHost(ctx, input, ACTOR);
      sendJson(rc.res, created ? 201 : 200, host);
    }),
  );

  router.add(
    'GET',
    '/admin/hosts/:id',
    steps.read('show-host', async ({ res, params }) => {
      const host = await ctx.store.host(params.id ?? '');
      if (!host) throw new ProtocolError('host_not_found', `No host "${params.id ?? ''}".`);
      // The first page of the host's agents (a host may hold any number): the rest are listed by
      // GET /admin/agents?host_id=…, which `agents_next` points to.
      const agents = await ctx.store.agents({ hostId: host.id, limit: HOST_AGENTS_SHOWN });
      sendJson(res, 200, {
        ...hostView(host),
        agents: agents.map((a) => ({
          agent_id: a.id,
          name: a.name,
          status: a.status,
          mode: a.mode,
        })),
        ...(agents.length === HOST_AGENTS_SHOWN
          ? { agents_next: `/admin/agents?host_id=${encodeURIComponent(host.id)}` }
          : {}),
      });
    }),
  );

  router.add(
    'POST',
    '/admin/hosts/:id/link',
    steps.change('link-host', async (rc) => {
      const userId = steps.stringOf(rc, 'user_id', MAX_USER_ID);
      if (!userId) throw new ProtocolError('invalid_request', 'user_id is required.');
      sendJson(rc.res, 200, await linkHostTo(ctx, rc.params.id ?? '', userId));
    }),
  );

  router.add(
    'POST',
    '/admin/hosts/:id/unlink',
    steps.change('unlink-host', async (rc) => {
      sendJson(rc.res, 200, await unlinkHost(ctx, rc.params.id ?? ''));
    }),
  );

  router.add(
    'POST',
    '/admin/hosts/:id/revoke',
    steps.change('revoke-host', async (rc) => {
      sendJson(rc.res, 200, await revokeHost(ctx, rc.params.id ?? '', ACTOR));
    }),
  );
}
