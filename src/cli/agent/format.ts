/**
 * Human-readable text for the agent commands' replies; `--json` prints the replies themselves.
 * Reads the reply fields of §5.3–§5.5 and §7.1 defensively: a missing field prints as nothing.
 */

type Json = Record<string, unknown>;

function str(value: unknown): string {
  return typeof value === 'string' || typeof value === 'number' ? String(value) : '';
}

function grantsOf(body: Json): Json[] {
  const grants = body.agent_capability_grants;
  return Array.isArray(grants) ? grants.filter((g): g is Json => typeof g === 'object' && g !== null) : [];
}

/** One line per grant: name, status, the constraints or the reason of a denial. */
export function grantsText(body: Json): string {
  const grants = grantsOf(body);
  if (grants.length === 0) return '  (no capabilities)\n';
  const width = Math.max(...grants.map((g) => str(g.capability).length));
  return grants
    .map((g) => {
      const extra =
        g.constraints !== undefined
          ? `  constraints ${JSON.stringify(g.constraints)}`
          : g.reason !== undefined
            ? `  (${str(g.reason)})`
            : '';
      return `  ${str(g.capability).padEnd(width)}  ${str(g.status)}${extra}\n`;
    })
    .join('');
}

/** §7.1: what the user must open, and the code to check there. */
export function approvalText(approval: unknown): string {
  if (typeof approval !== 'object' || approval === null) return '';
  const a = approval as Json;
  if (a.method !== 'device_authorization') {
    return `Approval by ${str(a.method)}: the user is asked directly; it expires in ${str(a.expires_in)} s.\n`;
  }
  return [
    `To approve, open ${str(a.verification_uri_complete)}`,
    `  (or open ${str(a.verification_uri)} and enter the code ${str(a.user_code)})`,
    `The request expires in ${str(a.expires_in)} s.`,
    '',
  ].join('\n');
}

export function statusText(body: Json): string {
  const lines = [
    `agent ${str(body.agent_id)} (${str(body.name)}): ${str(body.status)}, ${str(body.mode)}`,
    `host ${str(body.host_id)}${body.user_id ? `, user ${str(body.user_id)}` : ''}`,
  ];
  if (body.expires_at) lines.push(`session expires at ${str(body.expires_at)}`);
  return `${lines.join('\n')}\ncapabilities:\n${grantsText(body)}`;
}

/** What a finished wait means, in one line. */
export function outcomeText(agentStatus: string, timedOut: boolean): string {
  if (timedOut) return 'The approval request expired before anyone decided; register again for a new code.\n';
  return `agent is ${agentStatus}\n`;
}
