/**
 * What the agent itself does, with agent JWTs (§4.3): list capabilities with their grant status
 * (§5.2), request more (§5.4, optionally waiting for the decision), execute (§5.11, following a
 * `202` status_url with a fresh JWT per poll). Each returns its exit code.
 */
import { call, endpoint, onIssuer } from './client.js';
import * as format from './format.js';
import type { Session } from './session.js';
import { waitForApproval } from './wait.js';

/** A bound on listing: 50 pages of at most 200 is far beyond any catalog served today. */
const MAX_PAGES = 50;
/** §5.11: exponential backoff while an async execution runs, and a bound on the whole wait. */
const ASYNC_FIRST_POLL_MS = 1000;
const ASYNC_MAX_POLL_MS = 8000;
const ASYNC_MAX_WAIT_MS = 300_000;

export async function capabilities(s: Session): Promise<number> {
  const listed: Record<string, unknown>[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const url = new URL(endpoint(s.discovery, 'capabilities', '/capability/list'));
    url.searchParams.set('limit', '200');
    if (cursor !== undefined) url.searchParams.set('cursor', cursor);
    // With an agent JWT the list carries grant_status; before registering, a host JWT lists all.
    const credential =
      s.file.agent_id !== undefined ? s.agentCredential('GET', url.href) : s.hostCredential('GET', url.href);
    const { body } = await call('GET', url.href, credential);
    if (Array.isArray(body.capabilities)) listed.push(...(body.capabilities as Record<string, unknown>[]));
    if (body.has_more !== true || typeof body.next_cursor !== 'string') break;
    cursor = body.next_cursor;
  }
  if (s.json) {
    s.io.out(`${JSON.stringify({ capabilities: listed }, null, 2)}\n`);
    return 0;
  }
  const width = Math.max(4, ...listed.map((c) => String(c.name).length));
  for (const c of listed) {
    const grant = typeof c.grant_status === 'string' ? c.grant_status.padEnd(13) : '';
    const description =
      typeof c.description === 'string' ? (c.description.split('\n')[0] ?? '').slice(0, 60) : '';
    s.io.out(`${String(c.name).padEnd(width)}  ${grant}${description}`.trimEnd() + '\n');
  }
  return 0;
}

export async function requestCapability(
  s: Session,
  requested: readonly (string | { name: string; constraints: unknown })[],
  reason: string | undefined,
  wait: boolean,
): Promise<number> {
  const url = endpoint(s.discovery, 'request_capability', '/agent/request-capability');
  const { body } = await call('POST', url, s.agentCredential('POST', url), {
    capabilities: requested,
    ...(reason !== undefined ? { reason } : {}),
  });
  if (!s.json) {
    s.io.out(`requested:\n${format.grantsText(body)}`);
    s.io.out(format.approvalText(body.approval));
  }
  if (!wait || body.approval === undefined) {
    if (s.json) s.io.out(`${JSON.stringify(body, null, 2)}\n`);
    return 0;
  }
  const names = new Set(requested.map((r) => (typeof r === 'string' ? r : r.name)));
  const { status, timedOut } = await waitForApproval(s, body.approval, (st) => {
    const grants = Array.isArray(st.agent_capability_grants) ? st.agent_capability_grants : [];
    return !grants.some((g: { capability?: unknown; status?: unknown }) => {
      return typeof g.capability === 'string' && names.has(g.capability) && g.status === 'pending';
    });
  });
  if (s.json) {
    s.io.out(`${JSON.stringify({ request: body, status, timed_out: timedOut }, null, 2)}\n`);
  } else {
    s.io.out(timedOut ? format.outcomeText('', true) : `decided:\n${format.grantsText(status)}`);
  }
  if (timedOut) return 1;
  // As register --wait: anything short of every capability asked for being active is a failure,
  // so `agent request --wait && agent execute` does not go on after a denial.
  const grants = Array.isArray(status.agent_capability_grants) ? status.agent_capability_grants : [];
  const granted = (name: string): boolean =>
    grants.some(
      (g: { capability?: unknown; status?: unknown }) => g.capability === name && g.status === 'active',
    );
  return [...names].every(granted) ? 0 : 1;
}

/**
 * §5.11 at the discovery's default_location (this proxy sets no per-capability location), the
 * agent JWT's aud being that URL (§4.3). Prints `data`, or the async result once it is there.
 */
export async function execute(
  s: Session,
  capability: string,
  args: Record<string, unknown> | undefined,
  wait: boolean,
): Promise<number> {
  const location = s.discovery.defaultLocation;
  const reply = await call('POST', location, s.agentCredential('POST', location, location), {
    capability,
    ...(args !== undefined ? { arguments: args } : {}),
  });
  let body = reply.body;
  if (reply.stream !== undefined) {
    await reply.stream((text) => s.io.out(text));
    return 0;
  }
  if (reply.status === 202 && wait && typeof body.status_url === 'string') {
    // §8.12: a status URL is followed, with a signed token, only on the issuer's own origin.
    body = await pollAsync(s, onIssuer(s.discovery.issuer, body.status_url, 'a status_url'));
  }
  if (s.json) {
    s.io.out(`${JSON.stringify(body, null, 2)}\n`);
  } else if (body.status === 'pending') {
    s.io.out(`pending: poll ${String(body.status_url)} (or run again with --wait)\n`);
  } else if (body.status === 'failed') {
    const e = (body.error ?? {}) as Record<string, unknown>;
    s.io.err(`error: ${String(e.error)}: ${typeof e.message === 'string' ? e.message : ''}\n`);
    return 1;
  } else {
    s.io.out(`${JSON.stringify('data' in body ? body.data : body.result, null, 2)}\n`);
  }
  return body.status === 'failed' ? 1 : 0;
}

/** §5.11: a fresh agent JWT per poll (aud: the status URL), 1 s, 2 s, 4 s, 8 s … */
async function pollAsync(s: Session, statusUrl: string): Promise<Record<string, unknown>> {
  const deadline = s.runtime.now() + ASYNC_MAX_WAIT_MS;
  let delay = ASYNC_FIRST_POLL_MS;
  let body: Record<string, unknown> = { status: 'pending', status_url: statusUrl };
  while (body.status === 'pending' && s.runtime.now() < deadline) {
    await s.runtime.sleep(delay);
    delay = Math.min(delay * 2, ASYNC_MAX_POLL_MS);
    body = (await call('GET', statusUrl, s.agentCredential('GET', statusUrl, statusUrl))).body;
  }
  return body;
}
