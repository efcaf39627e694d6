/**
 * The agent's lifecycle from the host's side: register (§5.3) and wait for approval (§7.1),
 * status (§5.5), revoke (§5.7). Host JWTs throughout (§4.2). Each returns its exit code.
 */
import { hostname } from 'node:os';
import { call, endpoint } from './client.js';
import * as format from './format.js';
import type { Session } from './session.js';
import { fetchStatus, waitForApproval } from './wait.js';

export interface RegisterOptions {
  readonly name: string;
  readonly capabilities: readonly (string | { name: string; constraints: unknown })[];
  readonly mode: string | undefined;
  readonly reason: string | undefined;
  readonly wait: boolean;
}

export async function register(s: Session, o: RegisterOptions): Promise<number> {
  const url = endpoint(s.discovery, 'register', '/agent/register');
  const reply = await call('POST', url, s.hostCredential('POST', url, true), {
    name: o.name,
    // §5.3: informational, shown to the approver; never used for authorization.
    host_name: hostname(),
    ...(o.capabilities.length > 0 ? { capabilities: o.capabilities } : {}),
    ...(o.mode !== undefined ? { mode: o.mode } : {}),
    ...(o.reason !== undefined ? { reason: o.reason } : {}),
  });
  const body = reply.body;
  // Saved before any waiting, so `agent status` works from another shell meanwhile.
  s.save({
    url: s.url,
    ...(typeof body.agent_id === 'string' ? { agent_id: body.agent_id } : {}),
    ...(typeof body.host_id === 'string' ? { host_id: body.host_id } : {}),
  });
  if (s.json && !o.wait) {
    s.io.out(`${JSON.stringify(body, null, 2)}\n`);
    return 0;
  }
  if (!s.json) {
    s.io.out(`registered agent ${String(body.agent_id)} at ${s.discovery.issuer}: ${String(body.status)}\n`);
    s.io.out(format.approvalText(body.approval));
  }
  if (body.status !== 'pending' || !o.wait) {
    if (!s.json) s.io.out(`capabilities:\n${format.grantsText(body)}`);
    // §5.3: registering again with the same keys while pending is an idempotent retry.
    if (!s.json && body.status === 'pending')
      s.io.out('Check with agent-auth-proxy agent status, or run register again with --wait.\n');
    return 0;
  }
  return finishWait(s, body.approval, body);
}

/** `--wait` of register: poll until the agent leaves `pending` (§7.1) or the approval expires. */
async function finishWait(
  s: Session,
  approval: unknown,
  registered: Record<string, unknown>,
): Promise<number> {
  if (!s.json) s.io.out('Waiting for the decision…\n');
  const { status, timedOut } = await waitForApproval(s, approval, (st) => st.status !== 'pending');
  const agentStatus = typeof status.status === 'string' ? status.status : 'pending';
  if (s.json) {
    s.io.out(`${JSON.stringify({ registration: registered, status, timed_out: timedOut }, null, 2)}\n`);
  } else {
    s.io.out(format.outcomeText(agentStatus, timedOut));
    if (!timedOut) s.io.out(`capabilities:\n${format.grantsText(status)}`);
  }
  return !timedOut && agentStatus === 'active' ? 0 : 1;
}

export async function status(s: Session): Promise<number> {
  const body = await fetchStatus(s);
  s.io.out(s.json ? `${JSON.stringify(body, null, 2)}\n` : format.statusText(body));
  return 0;
}

/** §5.7: the host revokes its agent; permanent. The key file keeps the id for the record. */
export async function revoke(s: Session): Promise<number> {
  const url = endpoint(s.discovery, 'revoke', '/agent/revoke');
  const { body } = await call('POST', url, s.hostCredential('POST', url), {
    agent_id: s.agentId(),
  });
  s.io.out(s.json ? `${JSON.stringify(body, null, 2)}\n` : `agent ${s.agentId()}: ${String(body.status)}\n`);
  return 0;
}
