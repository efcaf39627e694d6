/**
 * The `request` log line, built once from the decision record when the response is finished
 * (§11: agent, capability, time and result of every call, and more). Only ids, names, codes and
 * numbers go in: never a header, a token or a body, so no secret can reach the log through it.
 */
import type { LogFields } from '../log.js';
import { stepTime, type DecisionRecord } from './pipeline.js';

// What a client sent reaches the line through the path, the reason (which may quote it) and the
// capability: each is cut here, so a line stays small whatever a request carries (a 15 KB path
// made a 30 KB line, written synchronously, for every 404).
const MAX_LOGGED_CHARS = 512;

function capped<T extends string | null>(text: T): T {
  return (
    text !== null && text.length > MAX_LOGGED_CHARS ? `${text.slice(0, MAX_LOGGED_CHARS)}…` : text
  ) as T;
}

export function decisionFields(d: DecisionRecord, path: string): LogFields {
  return {
    request_id: d.request_id,
    method: d.method,
    path: capped(path),
    route: d.route,
    status: d.status,
    step: d.step,
    // allow or deny, as an operator asks it; `outcome` keeps "error" apart (the proxy or the
    // upstream failed, rather than a rule refusing).
    decision: d.outcome === 'allow' ? 'allow' : 'deny',
    outcome: d.outcome,
    code: d.code,
    reason: capped(d.reason),
    agent_id: d.agent_id,
    host_id: d.host_id,
    user_id: d.user_id,
    capability: capped(d.capability),
    client_ip: d.client_ip,
    trace_id: d.trace_id,
    upstream_status: d.upstream_status,
    upstream_cause: d.upstream_cause,
    duration_ms: d.total_ms,
    upstream_ms: stepTime(d, 'upstream'),
  };
}
