/**
 * The grants of one agent on the account page (issue 16 §5): per grant its status, constraints,
 * expiry, how often and when it was last used, and why an ended grant ended. Capability names
 * come from the catalog and constraints from approvals; both are escaped all the same.
 */
import type { AccountGrant } from '../../protocol/account.js';
import { iso } from '../../protocol/context.js';
import type { GrantEnding } from '../../protocol/grant-ending.js';
import type { GrantRecord } from '../../storage/types.js';
import { escapeHtml } from '../html.js';

/** Why an ended grant ended, in the user's words (add 'used' text with per-call approvals). */
const ENDING_TEXT: Readonly<Record<GrantEnding, string>> = {
  revoked: 'revoked',
  expired: 'expired',
  denied: 'denied',
  used: 'used (it allowed one call)',
  agent_revoked: 'the agent was revoked',
  agent_expired: 'the agent’s session expired (reactivation asks again)',
};

export function grantList(grants: readonly AccountGrant[], more: number): string {
  if (grants.length === 0) return '<p>Nothing granted.</p>';
  const items = grants.map(grantItem);
  if (more > 0) items.push(`<li>and ${more} more</li>`);
  return `<ul class="grants">${items.join('\n')}</ul>`;
}

function grantItem(a: AccountGrant): string {
  const g = a.grant;
  const line = (cls: string, html: string): string => `<br><small class="${cls}">${html}</small>`;
  const bits = [`<code>${escapeHtml(g.capability)}</code> — ${escapeHtml(grantStatus(g))}`];
  bits.push(
    line(
      'grant-constraints',
      g.constraints
        ? `limited to <code>${escapeHtml(JSON.stringify(g.constraints))}</code>`
        : 'no constraints',
    ),
  );
  bits.push(constraintTrail(g));
  if (g.status === 'active' || g.expiresAt !== null) {
    bits.push(
      line(
        'grant-expiry',
        g.expiresAt === null
          ? 'no expiry of its own (lasts as long as the agent)'
          : `${a.ending === 'expired' ? 'expired at' : 'until'} ${escapeHtml(iso(g.expiresAt) ?? '')}`,
      ),
    );
  }
  bits.push(
    line(
      'grant-use',
      a.uses === 0
        ? 'never used'
        : `used ${a.uses} time${a.uses === 1 ? '' : 's'}, last used ${escapeHtml(iso(a.lastUsedAt) ?? 'unknown')}`,
    ),
  );
  if (g.grantedBy && g.status === 'active')
    bits.push(line('grant-by', `granted by ${escapeHtml(g.grantedBy)}`));
  if (a.ending !== null) {
    const why = g.reason && g.status !== 'active' ? ` — why: ${escapeHtml(g.reason)}` : '';
    bits.push(line('grant-ended', `ended: ${escapeHtml(ENDING_TEXT[a.ending])}${why}`));
  }
  return `<li class="grant" data-capability="${escapeHtml(g.capability)}">${bits.join('')}</li>`;
}

/**
 * §2.13, issue 16: what the agent proposed, what the approver approved and what is in effect, when
 * they differ (policy or the approver narrowed the proposal); nothing when all three agree.
 */
function constraintTrail(g: GrantRecord): string {
  const text = (c: Readonly<Record<string, unknown>> | null | undefined): string =>
    c ? `<code>${escapeHtml(JSON.stringify(c))}</code>` : 'none';
  const proposed = g.proposedConstraints ?? null;
  const approved = g.approvedConstraints ?? null;
  const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);
  if (proposed === null && approved === null) return '';
  if (same(proposed, g.constraints) && (approved === null || same(approved, g.constraints))) return '';
  const steps = [`proposed ${text(proposed)}`];
  if (g.grantedBy !== 'policy' && g.status !== 'pending') steps.push(`approved ${text(approved)}`);
  steps.push(`${g.status === 'active' ? 'in effect' : 'effective'} ${text(g.constraints)}`);
  return `<br><small class="constraint-trail">${steps.join(' → ')}</small>`;
}

function grantStatus(g: GrantRecord): string {
  switch (g.status) {
    case 'active':
      return 'allowed';
    case 'pending':
      return 'asked for, waiting for a decision';
    case 'denied':
      return 'denied';
    case 'revoked':
      return 'ended';
  }
}
