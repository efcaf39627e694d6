/**
 * The "Your agents" and "Connected apps" (hosts, §10.8) sections of `{issuer}/account` (issue 11):
 * each agent with its grants (constraints, expiry, who granted, why an ended one ended), its recent
 * activity, and two POST forms — revoke it, delete its activity records (§9.2); each host with a
 * form to disconnect (revoke) it (§8.8.1). Names are chosen by agents (§8.10):
 * escaped, shown as text, never as a link.
 */
import type { AccountAgent, AccountAgents, DeletedActivity, RevokedHost } from '../../protocol/account.js';
import {
  ACCOUNT_PAGE_SIZE,
  ACTIVITY_DELETE_BATCH,
  MAX_HOSTS_SHOWN,
  RECENT_ACTIVITY,
} from '../../protocol/account.js';
import { iso } from '../../protocol/context.js';
import type { ActivityRecord, AgentRecord, HostRecord, SessionRecord } from '../../storage/types.js';
import { escapeHtml } from '../html.js';
import { grantList } from './account-grants.js';

const TERMINAL = new Set(['revoked', 'rejected', 'claimed']);

const STATUS_TEXT: Readonly<Record<AgentRecord['status'], string>> = {
  pending: 'waiting for approval',
  active: 'active',
  expired: 'expired (it may ask to be reactivated)',
  revoked: 'revoked',
  rejected: 'rejected',
  claimed: 'claimed',
};

/** What the last POST did, shown above the list. */
export type AgentsOutcome =
  | { readonly kind: 'revoked'; readonly agent: AgentRecord }
  | { readonly kind: 'host-revoked'; readonly result: RevokedHost }
  | { readonly kind: 'deleted'; readonly result: DeletedActivity };

export function agentsSection(
  view: AccountAgents,
  session: SessionRecord,
  retentionMs: number | null,
): string {
  const parts = [
    '<section id="agents" aria-labelledby="agents-title">',
    '<h2 id="agents-title">Your agents</h2>',
    retentionText(retentionMs),
  ];
  if (view.total === 0) {
    parts.push('<p id="no-agents">No agent acts for you yet.</p>');
  } else {
    parts.push(
      `<p>${view.total} agent${view.total === 1 ? '' : 's'} act${view.total === 1 ? 's' : ''} for you, newest first (${ACCOUNT_PAGE_SIZE} a page; the last ${RECENT_ACTIVITY} activity records each). Names are chosen by the agents, not verified by this server.</p>`,
    );
    for (const a of view.agents) parts.push(agentCard(a, session));
    if (view.pages > 1) parts.push(pager(view));
  }
  parts.push('</section>', hostsSection(view, session));
  return parts.join('\n');
}

/** §9.2: how long this server keeps what agents did, in the user's words. */
function retentionText(retentionMs: number | null): string {
  const kept =
    retentionMs === null
      ? 'This server keeps activity records until they are deleted.'
      : `This server deletes activity records after ${humanDuration(retentionMs)}.`;
  return `<p id="retention">${kept} You may delete an agent's records sooner below.</p>`;
}

function humanDuration(ms: number): string {
  const units: [number, string][] = [
    [86_400_000, 'day'],
    [3_600_000, 'hour'],
    [60_000, 'minute'],
  ];
  for (const [size, unit] of units) {
    if (ms >= size && ms % size === 0) return `${ms / size} ${unit}${ms === size ? '' : 's'}`;
  }
  return `${Math.round(ms / 1000)} seconds`;
}

export function agentsOutcome(o: AgentsOutcome): string {
  const text =
    o.kind === 'revoked'
      ? `The agent ${o.agent.name} is revoked: it can no longer act for you, and this cannot be undone.`
      : o.kind === 'host-revoked'
        ? hostRevokedText(o.result)
        : o.result.deleted === 0
          ? `The agent ${o.result.agent.name} had no activity records to delete.`
          : `Deleted ${o.result.deleted} activity record${o.result.deleted === 1 ? '' : 's'} of the agent ${o.result.agent.name}.${
              o.result.more
                ? ` More remain: press "Delete activity records" again (${ACTIVITY_DELETE_BATCH} at a time).`
                : ''
            }`;
  return `<p id="outcome" class="ok" role="status">${escapeHtml(text)}</p>`;
}

function hostRevokedText({ host, agentsRevoked }: RevokedHost): string {
  const name = host.name ?? host.id;
  if (agentsRevoked === 0 && host.status === 'revoked') {
    return `The app ${name} is disconnected: neither it nor its agents can act for you any more.`;
  }
  return `The app ${name} is disconnected, with its ${agentsRevoked} agent${agentsRevoked === 1 ? '' : 's'}: none can act for you any more, and this cannot be undone.`;
}

/** §9.2: the form that deletes an agent's activity records (POST /account/agents/delete-activity). */
export function deleteActivityForm(agent: AgentRecord, session: SessionRecord): string {
  const id = escapeHtml(agent.id);
  return `<form method="post" action="/account/agents/delete-activity" class="inline">
<input type="hidden" name="csrf" value="${escapeHtml(session.csrfToken)}">
<input type="hidden" name="agent_id" value="${id}">
<button type="submit" id="delete-activity-${id}">Delete activity records of ${escapeHtml(agent.name)}</button>
</form>`;
}

function agentCard(a: AccountAgent, session: SessionRecord): string {
  const { agent, host } = a;
  const id = escapeHtml(agent.id);
  const hidden = `<input type="hidden" name="csrf" value="${escapeHtml(session.csrfToken)}">
<input type="hidden" name="agent_id" value="${id}">`;
  const forms: string[] = [];
  if (!TERMINAL.has(agent.status)) {
    forms.push(`<form method="post" action="/account/agents/revoke" class="inline">
${hidden}
<button type="submit" class="deny" id="revoke-${id}">Revoke agent ${escapeHtml(agent.name)}</button>
</form>`);
  }
  if (a.recent.length > 0) forms.push(deleteActivityForm(agent, session));
  return `<article class="agent" id="agent-${id}" aria-labelledby="agent-title-${id}">
<h3 id="agent-title-${id}">${escapeHtml(agent.name)}</h3>
<dl>
<dt>Status</dt><dd class="agent-status">${escapeHtml(STATUS_TEXT[agent.status])}</dd>
<dt>Mode</dt><dd>${agent.mode === 'delegated' ? 'acts for you (delegated)' : 'autonomous, claimed by you'}</dd>
<dt>Connected app</dt><dd>${host?.name ? escapeHtml(host.name) : '<em>unnamed</em>'} <small class="code">${escapeHtml(agent.hostId)}</small></dd>
<dt>Agent id</dt><dd class="code">${id}</dd>
<dt>Connected</dt><dd>${escapeHtml(iso(agent.createdAt) ?? '')}</dd>
<dt>Last used</dt><dd>${a.lastUsedAt === null ? 'never' : escapeHtml(iso(a.lastUsedAt) ?? '')}</dd>
</dl>
<h4>What it may do</h4>
${grantList(a.grants, a.moreGrants)}
<h4>Recent activity</h4>
${activityList(a)}
${forms.join('\n')}
</article>`;
}

function activityList(a: AccountAgent): string {
  if (a.recent.length === 0) return '<p>No activity records.</p>';
  const all = `<p><a href="/account/activity?agent_id=${escapeHtml(encodeURIComponent(a.agent.id))}" id="all-activity-${escapeHtml(a.agent.id)}">All activity records of ${escapeHtml(a.agent.name)}</a></p>`;
  return `<ul class="activity">${a.recent.map(activityItem).join('\n')}</ul>\n${all}`;
}

/** One activity record as a list item: when, what (and on which capability), how it ended. */
export function activityItem(r: ActivityRecord): string {
  const what = r.capability ? `${r.type} <code>${escapeHtml(r.capability)}</code>` : escapeHtml(r.type);
  return `<li><small>${escapeHtml(iso(r.at) ?? '')}</small> ${what} — ${escapeHtml(r.outcome)}</li>`;
}

function pager(view: AccountAgents): string {
  const link = (page: number, text: string, rel: string): string =>
    `<a href="/account?page=${page}#agents" rel="${rel}">${text}</a>`;
  const parts = [`Page ${view.page} of ${view.pages}.`];
  if (view.page > 1) parts.push(link(view.page - 1, 'Newer agents', 'prev'));
  if (view.page < view.pages) parts.push(link(view.page + 1, 'Older agents', 'next'));
  return `<nav aria-label="Agent pages" id="agent-pages"><p>${parts.join(' ')}</p></nav>`;
}

function hostsSection(view: AccountAgents, session: SessionRecord): string {
  if (view.hosts.length === 0) return '';
  const items = view.hosts.map((h: HostRecord) => {
    const id = escapeHtml(h.id);
    const name = h.name ? escapeHtml(h.name) : '<em>unnamed</em>';
    const disconnect = `<form method="post" action="/account/hosts/revoke">
<input type="hidden" name="csrf" value="${escapeHtml(session.csrfToken)}">
<input type="hidden" name="host_id" value="${id}">
<button type="submit" class="deny" id="revoke-host-${id}">Disconnect ${name}</button>
</form>`;
    return `<li id="host-${id}"><strong>${name}</strong> <small class="code">${id}</small> — ${escapeHtml(h.status)}, linked ${escapeHtml(iso(h.activatedAt ?? h.createdAt) ?? '')}${
      h.lastUsedAt !== null ? `, last used ${escapeHtml(iso(h.lastUsedAt) ?? '')}` : ''
    }${disconnect}</li>`;
  });
  if (view.moreHosts) items.push(`<li>and more: the ${MAX_HOSTS_SHOWN} oldest are shown</li>`);
  return `<section id="hosts" aria-labelledby="hosts-title">
<h2 id="hosts-title">Connected apps</h2>
<p>The apps and machines your agents run from (hosts, in the protocol's words), linked to your account. Disconnecting one revokes it and every agent under it; that cannot be undone, and it leaves this list.</p>
<ul>${items.join('\n')}</ul>
</section>`;
}
