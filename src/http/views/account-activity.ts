/**
 * `{issuer}/account/activity?agent_id=…` (§9.2): every activity record of one of the user's
 * agents, newest first, a page at a time, with the same delete form as the account page. The
 * agent's name is its own choice (§8.10): escaped, shown as text.
 */
import type { AgentActivityPage } from '../../protocol/account.js';
import { ACTIVITY_PAGE_SIZE } from '../../protocol/account.js';
import type { SessionRecord } from '../../storage/types.js';
import { escapeHtml } from '../html.js';
import { activityItem, deleteActivityForm } from './account-agents.js';

export function agentActivityView(view: AgentActivityPage, session: SessionRecord, title: string): string {
  const { agent } = view;
  const id = escapeHtml(agent.id);
  const query = `agent_id=${escapeHtml(encodeURIComponent(agent.id))}`;
  const list =
    view.records.length === 0
      ? '<p id="no-activity">No activity records.</p>'
      : `<ul class="activity" id="activity">${view.records.map(activityItem).join('\n')}</ul>`;
  const older =
    view.olderBefore === null
      ? ''
      : `<nav aria-label="Activity pages"><p><a href="/account/activity?${query}&amp;before=${view.olderBefore}" rel="next" id="older">Older records</a></p></nav>`;
  const remove = view.records.length === 0 ? '' : deleteActivityForm(agent, session);
  return `<h1>${escapeHtml(title)}</h1>
<p><a href="/account#agent-${id}">Back to your account</a></p>
<p>Everything this server recorded of the agent <strong>${escapeHtml(agent.name)}</strong> (<span class="code">${id}</span>), newest first, ${ACTIVITY_PAGE_SIZE} a page.</p>
${list}
${older}
${remove}`;
}
