/**
 * Polling `GET /agent/status` while an approval is open (§5.3, §5.4, §7.1): at the approval's
 * `interval`, never past its `expires_in`, a little slower when the proxy says `rate_limited`.
 * The sleep is the session's, so tests move a test clock instead of waiting.
 */
import { call, endpoint, ProxyError } from './client.js';
import type { Session } from './session.js';

export type Status = Record<string, unknown>;

export interface Waited {
  readonly status: Status;
  /** The approval expired (or the wait hit its bound) while `done` was still false. */
  readonly timedOut: boolean;
}

/** §7.1 does not fix defaults; these are RFC 8628 §3.2's interval and a common expiry. */
const DEFAULT_INTERVAL_SEC = 5;
const DEFAULT_EXPIRES_SEC = 300;
const MAX_WAIT_MS = 3_600_000;
const MAX_INTERVAL_SEC = 60;

export async function fetchStatus(s: Session): Promise<Status> {
  const url = new URL(endpoint(s.discovery, 'status', '/agent/status'));
  url.searchParams.set('agent_id', s.agentId());
  return (await call('GET', url.href, s.hostCredential('GET', url.href))).body;
}

export async function waitForApproval(
  s: Session,
  approval: unknown,
  done: (status: Status) => boolean,
): Promise<Waited> {
  const a = (typeof approval === 'object' && approval !== null ? approval : {}) as Record<string, unknown>;
  // A server's interval is taken up to a minute: larger ones (1e8 s) overflowed the timer into
  // polling as fast as the loop could.
  let intervalMs = 1000 * Math.min(positive(a.interval, DEFAULT_INTERVAL_SEC), MAX_INTERVAL_SEC);
  // The approver may extend the request (the status's approval.expires_in grows); the server
  // bounds that, and so does the client, should a server not: an hour at the most.
  const limit = s.runtime.now() + MAX_WAIT_MS;
  let deadline = Math.min(limit, s.runtime.now() + 1000 * positive(a.expires_in, DEFAULT_EXPIRES_SEC));
  let status: Status = {};
  while (s.runtime.now() < deadline) {
    await s.runtime.sleep(Math.min(intervalMs, Math.max(0, deadline - s.runtime.now())));
    try {
      status = await fetchStatus(s);
    } catch (err) {
      // RFC 8628 §3.5 slow_down: back off and keep polling; any other error ends the wait.
      if (!(err instanceof ProxyError && err.code === 'rate_limited')) throw err;
      intervalMs = Math.min(intervalMs + 5000, 1000 * MAX_INTERVAL_SEC);
      continue;
    }
    if (done(status)) return { status, timedOut: false };
    const open = status.approval as { expires_in?: unknown } | undefined;
    if (typeof open?.expires_in === 'number' && Number.isFinite(open.expires_in)) {
      deadline = Math.min(limit, s.runtime.now() + 1000 * Math.max(0, open.expires_in));
    }
  }
  return { status, timedOut: true };
}

function positive(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : fallback;
}
