/**
 * The one shape of every endpoint: a list of named steps run in order by `endpoint()`. A step
 * either passes (it may add to the exchange) or throws a ProtocolError, which decides the
 * request. Reading a route file shows its steps in the order they run; the shared steps
 * (src/http/steps/) keep one order for all endpoints:
 *
 *   per-IP limits → bearer token verified (before the body is read) → principal limits →
 *   replay record → bounded body → authorization → validation → action → record
 *
 * so a request that fails a cheap check costs nothing later, and one that fails verification
 * or a limit stores nothing (issue: "one request pipeline").
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ErrorCode } from '../errors.js';
import type { AgentAuth, HostAuth } from '../protocol/authenticate.js';
import type { SessionRecord } from '../storage/types.js';

/**
 * What each request leaves behind: which step decided, the outcome, the reason, who asked and
 * how long each step took. A plain object so that logs and metrics can read it as they like.
 */
export interface DecisionRecord {
  readonly request_id: string;
  /** The route's name, e.g. `POST /capability/execute`: bounded, never the raw path. */
  route: string;
  readonly method: string;
  readonly client_ip: string;
  /** The step that decided: the failing one, or the last one when all passed. */
  step: string | null;
  outcome: 'allow' | 'deny' | 'error';
  /** The error code when the request was refused or failed. */
  code: ErrorCode | null;
  reason: string | null;
  status: number | null;
  agent_id: string | null;
  host_id: string | null;
  user_id: string | null;
  capability: string | null;
  /** The W3C trace id of the upstream call (the agent's, or one the proxy started). */
  trace_id: string | null;
  /** The upstream's HTTP status, when it answered. */
  upstream_status: number | null;
  /** Why the upstream call failed underneath (ECONNREFUSED, timeout …; src/upstream/answers.ts). */
  upstream_cause: string | null;
  /**
   * The route's steps, and beside them the milliseconds each took (-1: it did not run; read one
   * with `stepTime`). One array per request, where a record built step by step left about 600
   * bytes of garbage per request on the execute path, and was mostly never read.
   */
  steps: readonly string[];
  stepMs: number[];
  total_ms: number;
}

/** The milliseconds step `name` took, or null when it did not run. */
export function stepTime(d: DecisionRecord, name: string): number | null {
  const i = d.steps.indexOf(name);
  const ms = i < 0 ? -1 : (d.stepMs[i] ?? -1);
  return ms >= 0 ? ms : null;
}
export function newDecision(requestId: string, method: string, clientIp: string): DecisionRecord {
  return {
    request_id: requestId,
    route: '-',
    method,
    client_ip: clientIp,
    step: null,
    outcome: 'allow',
    code: null,
    reason: null,
    status: null,
    agent_id: null,
    host_id: null,
    user_id: null,
    capability: null,
    trace_id: null,
    upstream_status: null,
    upstream_cause: null,
    steps: [],
    stepMs: [],
    total_ms: 0,
  };
}

/** The request as the steps see it; shared steps fill the optional parts. */
export interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly url: URL;
  readonly params: Readonly<Record<string, string>>;
  readonly requestId: string;
  /** The client's address, after `server.trusted_proxies` (src/http/client-address.ts). */
  readonly clientIp: string;
  readonly decision: DecisionRecord;
  /**
   * Which challenge a 401 carries (set by the token step): `protocol` adds the §5.14 AgentAuth
   * challenge pointing at discovery to the RFC 6750 Bearer one; `operator` only Bearer.
   */
  challenge?: 'protocol' | 'operator';
  /** Set by a token step once the token is verified. */
  agent?: AgentAuth;
  host?: HostAuth;
  /** Set by the body step: the parsed JSON object. */
  body?: Readonly<Record<string, unknown>>;
  /** Set by the page step: errors render as an HTML page rather than §5.13 JSON. */
  page?: boolean;
  /** Set by the session step on pages: the signed-in approver, if any. */
  session?: SessionRecord;
  /** The session cookie's value as sent (to end it at sign-in / sign-out). */
  sessionCookie?: string;
  /** Set by the form step: the url-encoded form fields of a page POST. */
  form?: URLSearchParams;
  /** Called when the client goes away before its answer has finished (a route cancels its work). */
  abandoned?: () => void;
}

export interface Step<S> {
  readonly name: string;
  readonly run: (x: Exchange, state: S) => void | Promise<void>;
}

/** A step that needs nothing of the route's own state (the shared steps). */
export type SharedStep = Step<unknown>;

/** Builds a step; the name is what the decision record shows when this step decides. */
export function step<S>(name: string, run: (x: Exchange, state: S) => void | Promise<void>): Step<S> {
  return { name, run };
}

export type Handler = (x: Exchange) => Promise<void>;

/**
 * One endpoint: the route's name, its steps and a fresh per-request state. Each step is timed
 * and, when it throws, named in the decision record as the one that decided; the error goes on
 * to the server, which renders it (§5.13). A step that ends the response ends the route.
 */
export function endpoint<S>(
  route: string,
  steps: readonly (Step<S> | SharedStep)[],
  init: () => S,
  record?: Recorder<S>,
): Handler {
  const names = steps.map((s) => s.name);
  const duplicate = names.find((name, i) => names.indexOf(name) !== i);
  if (duplicate !== undefined) throw new Error(`${route}: two steps named ${duplicate}`);
  return async (x: Exchange) => {
    x.decision.route = route;
    x.decision.steps = names;
    const ms = new Array<number>(steps.length).fill(-1);
    x.decision.stepMs = ms;
    const state = init();
    let failure: unknown;
    let started = performance.now();
    let i = 0;
    try {
      for (; i < steps.length; i++) {
        const s = steps[i] as Step<S> | SharedStep;
        x.decision.step = s.name;
        const result = s.run(x, state);
        // Most steps are synchronous: awaiting only real promises keeps the hot path off the
        // microtask queue (measured on the execute benchmark).
        if (result instanceof Promise) await result;
        const now = performance.now();
        ms[i] = roundMs(now - started);
        started = now;
        // A step that answered ends the route (e.g. a per-call execute answered 202 before the
        // upstream steps); the last word below still runs.
        if (x.res.writableEnded) break;
      }
    } catch (err) {
      failure = err;
      ms[i] = roundMs(performance.now() - started);
      throw err;
    } finally {
      record?.(x, state, failure);
    }
  };
}

/**
 * The route's last word, run whatever happened: the activity record of an execution, say. It
 * gets the error when a step failed, and decides itself whether the attempt is worth a record.
 */
export type Recorder<S> = (x: Exchange, state: S, failure: unknown) => void;

export function roundMs(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/** A value an earlier step must have set; a missing one is a wiring bug, not a client error. */
export function need<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`pipeline: ${what} is not set by an earlier step`);
  return value;
}
