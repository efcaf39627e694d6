/**
 * The "Your agents" and "Connected apps" sections of `{issuer}/account` and their POSTs (issue 11):
 *
 *   POST /account/agents/revoke           agent_id → revoked as §5.7 does it (§2.6: the owning user)
 *   POST /account/hosts/revoke            host_id → revoked with its agents as §5.10 (§8.8.1)
 *   POST /account/agents/delete-activity  agent_id → its activity records deleted (§9.2), bounded
 *   GET  /account/activity                agent_id, before → all its records, a page at a time (§9.2)
 *
 * Each: page → per-IP → session → form → same origin + CSRF → action on the user's OWN agent only
 * (another user's agent or host is answered 404 and nothing changes: src/protocol/account.ts).
 */
import { ProtocolError } from '../../errors.js';
import {
  accountAgents,
  deleteOwnActivity,
  ownAgentActivity,
  revokeOwnAgent,
  revokeOwnHost,
} from '../../protocol/account.js';
import type { ProtocolContext } from '../../protocol/context.js';
import type { PageAuth } from '../page-auth.js';
import { need, step, type Exchange } from '../pipeline.js';
import type { RateLimits } from '../rate-limits.js';
import type { Router } from '../router.js';
import { escapeHtml, htmlPage, sendHtml, signInLink } from '../html.js';
import { perIp } from '../steps/limits.js';
import { page, pageForm, session } from '../steps/page.js';
import { agentActivityView } from '../views/account-activity.js';
import { agentsOutcome, agentsSection } from '../views/account-agents.js';
import type { AccountPage, AccountSection } from './account.js';

/** The section: one page of the user's agents (`?page=N`, clamped) and their hosts. */
export function agentsAccountSection(
  ctx: ProtocolContext,
  flushActivity: () => Promise<void>,
  /** `audit.retention`, told to the user (§9.2: retention is published); null: kept. */
  retentionMs: number | null,
): AccountSection {
  return async (x, s) => {
    // Queued execution records first, so "recent activity" is never behind (audit.commit_window).
    await flushActivity();
    const requested = Number(x.url.searchParams.get('page') ?? '1');
    const view = await accountAgents(ctx, s.userId, Number.isFinite(requested) ? requested : 1);
    return agentsSection(view, s, retentionMs);
  };
}

export interface AccountAgentRouteOptions {
  readonly serverName: string;
  readonly ctx: ProtocolContext;
  readonly auth: PageAuth;
  readonly limits: RateLimits;
  readonly page: AccountPage;
  readonly flushActivity: () => Promise<void>;
}

const AGENT_ID = /^agt_[A-Za-z0-9_-]{1,64}$/;
const HOST_ID = /^hst_[A-Za-z0-9_-]{1,64}$/;

/** `before` (an activity record id) as given, or undefined; anything else is a 400. */
function beforeOf(value: string | null): number | undefined {
  if (value === null) return undefined;
  if (!/^[1-9][0-9]{0,15}$/.test(value)) {
    throw new ProtocolError('invalid_request', '"before" must be a record id from an "Older records" link.');
  }
  return Number(value);
}

export function accountAgentRoutes(router: Router, options: AccountAgentRouteOptions): void {
  const { ctx, auth, limits } = options;
  const steps = pageForm(auth, limits, { token: true });
  const agentId = (x: Exchange): string => {
    const id = need(x.form, 'form').get('agent_id') ?? '';
    if (!AGENT_ID.test(id)) throw new ProtocolError('invalid_request', 'That is not an agent id.');
    x.decision.agent_id = id;
    return id;
  };
  // Another user's agent (or host) and none at all read the same: nothing about others is revealed.
  const own =
    (code: 'agent_not_found' | 'host_not_found', message: string) =>
    async <T>(action: () => Promise<T>): Promise<T> => {
      try {
        return await action();
      } catch (err) {
        if (err instanceof ProtocolError && err.code === code) throw new ProtocolError(code, message);
        throw err;
      }
    };
  const ownAgent = own('agent_not_found', 'None of your agents has that id, so nothing was changed.');
  const yourAgent = own('agent_not_found', 'None of your agents has that id.');
  const ownHost = own('host_not_found', 'None of your connected apps has that id, so nothing was changed.');

  router.add('POST', '/account/agents/revoke', [
    ...steps,
    step('revoke-agent', async (x) => {
      const s = need(x.session, 'session');
      const id = agentId(x);
      const agent = await ownAgent(() => revokeOwnAgent(ctx, s.userId, id));
      await options.page.show(x, s, 200, agentsOutcome({ kind: 'revoked', agent }));
    }),
  ]);

  router.add('GET', '/account/activity', [
    page,
    perIp(limits),
    session(auth),
    step('agent-activity', async (x) => {
      const title = `Activity — ${options.serverName}`;
      const id = x.url.searchParams.get('agent_id') ?? '';
      const s = x.session;
      if (!s) {
        const back = `/account/activity?agent_id=${encodeURIComponent(id.slice(0, 100))}`;
        sendHtml(x.res, 200, htmlPage(title, `<h1>${escapeHtml(title)}</h1>\n${signInLink(back)}`));
        return;
      }
      if (!AGENT_ID.test(id)) throw new ProtocolError('invalid_request', 'That is not an agent id.');
      x.decision.agent_id = id;
      const before = beforeOf(x.url.searchParams.get('before'));
      // Queued execution records first, so the newest page is never behind.
      await options.flushActivity();
      const view = await yourAgent(() => ownAgentActivity(ctx, s.userId, id, before));
      sendHtml(x.res, 200, htmlPage(title, agentActivityView(view, s, title)));
    }),
  ]);

  router.add('POST', '/account/hosts/revoke', [
    ...steps,
    step('revoke-host', async (x) => {
      const s = need(x.session, 'session');
      const id = need(x.form, 'form').get('host_id') ?? '';
      if (!HOST_ID.test(id)) throw new ProtocolError('invalid_request', 'That is not a host id.');
      x.decision.host_id = id;
      const result = await ownHost(() => revokeOwnHost(ctx, s.userId, id));
      await options.page.show(x, s, 200, agentsOutcome({ kind: 'host-revoked', result }));
    }),
  ]);

  router.add('POST', '/account/agents/delete-activity', [
    ...steps,
    step('delete-activity', async (x) => {
      const s = need(x.session, 'session');
      const id = agentId(x);
      // Queued execution records of this agent are written first, so none reappears afterwards.
      await options.flushActivity();
      const result = await ownAgent(() => deleteOwnActivity(ctx, s.userId, id));
      await options.page.show(x, s, 200, agentsOutcome({ kind: 'deleted', result }));
    }),
  ]);
}
