/**
 * §5.11 `POST /capability/execute` and the async status URL `GET /capability/status/{id}`.
 * Reads the request, authorizes it (src/protocol/execute.ts), hands it to the executor, and
 * writes the outcome: `{data}`, an SSE relay, or `202 {status: "pending", status_url}`. Every
 * authenticated attempt is recorded in the activity log (§11).
 */
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { ExecutionSettings } from '../../config/settings.js';
import { ProtocolError, toProtocolError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { authenticateAgent } from '../../protocol/authenticate.js';
import type { ProtocolContext } from '../../protocol/context.js';
import type { AgentAuth } from '../../protocol/authenticate.js';
import {
  authenticateExecution,
  authorizeExecution,
  readExecuteBody,
  streamStillAuthorized,
  type ArgumentValidators,
  type AuthorizedExecution,
} from '../../protocol/execute.js';
import type { ExecutionLog } from '../../protocol/execution-log.js';
import type { InFlightSlots, Slot } from '../../protocol/in-flight.js';
import { cachedGrants } from '../../protocol/grants.js';
import { isGrantEffective } from '../../protocol/lifecycle.js';
import type { ActivityRecord } from '../../storage/types.js';
import type { UpstreamReply } from '../../upstream/client.js';
import { validTraceparent, type CallerIdentity, type Executor } from '../../upstream/executor.js';
import { formatSse, SseParser } from '../../upstream/sse.js';
import { readJsonObject } from '../body.js';
import { requireBearer } from '../credentials.js';
import { takeUpstreamSlot } from '../in-flight.js';
import type { RateLimits } from '../rate-limits.js';
import { sendJson } from '../respond.js';
import type { Router } from '../router.js';

export interface ExecuteRouteOptions {
  readonly ctx: ProtocolContext;
  readonly limits: RateLimits;
  /** Fair share: caps on upstream calls in flight per agent, per host and in total. */
  readonly inFlight: InFlightSlots;
  readonly executor: Executor;
  readonly validators: ArgumentValidators;
  readonly log: ExecutionLog;
  readonly settings: ExecutionSettings;
  readonly maxBodyBytes: number;
  readonly logger: Logger;
}

const STATUS_PATH = '/capability/status/';

/** What the composition root needs at shutdown. */
export interface ExecuteRoutes {
  /** Ends every open stream (error `temporarily_unavailable`, then `done`), so shutdown is not held up. */
  closeStreams(): void;
}

export function executeRoutes(router: Router, options: ExecuteRouteOptions): ExecuteRoutes {
  const { ctx, limits, executor, validators, log } = options;
  const streams = new Set<(error?: ProtocolError) => void>();

  router.add('POST', '/capability/execute', async (rc) => {
    const started = performance.now();
    // The id the access log, the upstream and the agent all see.
    const requestId = rc.requestId;
    const token = requireBearer(rc.req);
    const request = readExecuteBody(await readJsonObject(rc.req, options.maxBodyBytes));
    // Failures before this point (bad JWT) are not attributable to an agent and not recorded.
    const auth = authenticateExecution(ctx, token);
    let upstreamStatus: number | null = null;
    let slot: Slot | undefined;
    try {
      limits.agent(auth.agent.id, auth.host.id, auth.agent.userId);
      const authorized = authorizeExecution(ctx, auth, request, validators);
      const { capability } = authorized;
      limits.capability(capability.name, auth.agent.id, auth.host.id, auth.agent.userId);
      // STEP (fair share, issue 10 class 7): an upstream slot for this agent and host, taken
      // after authorization and held until the call is over. Released once, in the `finally`
      // below, on every path: data, 202, upstream error or timeout, agent disconnect (the abort
      // makes the executor throw), and stream end (relayStream returns only once the stream is
      // finished, whatever finished it). A full cap → 429 rate_limited with Retry-After.
      slot = takeUpstreamSlot(options.inFlight, { agentId: auth.agent.id, hostId: auth.host.id });
      const abort = new AbortController();
      // Only an agent that goes away mid-call cancels it (a finished response closes too).
      rc.res.once('close', () => {
        if (!rc.res.writableFinished) abort.abort();
      });
      const traceparent = validTraceparent(rc.req.headers.traceparent);
      const outcome = await executor.execute({
        capability,
        args: authorized.args,
        caller: callerOf(authorized),
        requestId,
        ...(traceparent ? { traceparent } : {}),
        controller: abort,
      });
      upstreamStatus = outcome.upstreamStatus;
      if (outcome.kind === 'data') {
        sendJson(rc.res, 200, { data: outcome.data });
      } else if (outcome.kind === 'async') {
        const now = ctx.clock.now();
        const id = `job_${randomBytes(18).toString('base64url')}`;
        ctx.store.insertAsyncJob({
          id,
          agentId: auth.agent.id,
          capability: capability.name,
          upstreamUrl: outcome.upstreamUrl,
          createdAt: now,
          expiresAt: now + options.settings.asyncJobTtlMs,
        });
        sendJson(
          rc.res,
          202,
          { status: 'pending', status_url: `${ctx.issuer()}${STATUS_PATH}${id}` },
          outcome.retryAfter ? { 'retry-after': outcome.retryAfter } : {},
        );
      } else {
        await relayStream(rc.res, outcome, authorized, options, abort, streams);
      }
      log.record(activity(ctx, auth, request, 'success', started, upstreamStatus, requestId));
    } catch (err) {
      const e = toProtocolError(err);
      const status = typeof e.fields.upstream_status === 'number' ? e.fields.upstream_status : upstreamStatus;
      log.record(activity(ctx, auth, request, e.code, started, status, requestId, e.message));
      throw e;
    } finally {
      slot?.release();
    }
  });

  router.add('GET', '/capability/status/:id', async (rc) => {
    const requestId = rc.requestId;
    const id = rc.params.id ?? '';
    const statusUrl = `${ctx.issuer()}${STATUS_PATH}${id}`;
    const token = requireBearer(rc.req);
    // §5.11: a fresh agent JWT per poll; its audience may be the status URL itself.
    const auth = authenticateAgent(ctx, token, [statusUrl, ctx.executeLocation(), ctx.issuer()]);
    limits.agent(auth.agent.id, auth.host.id, auth.agent.userId);
    const job = ctx.store.asyncJob(id);
    if (!job || job.expiresAt <= ctx.clock.now()) {
      throw new ProtocolError(
        'execution_not_found',
        'No async execution with that id exists, or it has expired.',
      );
    }
    // §5.11: only the agent that started the execution may read it.
    if (job.agentId !== auth.agent.id) {
      throw new ProtocolError('unauthorized', 'This execution belongs to another agent.');
    }
    const capability = ctx.catalog.get(job.capability);
    const now = ctx.clock.now();
    const granted = cachedGrants(ctx, auth.agent.id).some(
      (g) => g.capability === job.capability && isGrantEffective(g, now),
    );
    if (!capability || !granted) {
      throw new ProtocolError('capability_not_granted', `The agent no longer holds ${job.capability}.`);
    }
    // STEP (fair share): a status poll is an upstream call too, so it holds a slot while it runs.
    const slot = takeUpstreamSlot(options.inFlight, { agentId: auth.agent.id, hostId: auth.host.id });
    let state: Awaited<ReturnType<Executor['poll']>>;
    try {
      state = await executor.poll(capability, job.upstreamUrl, callerOf({ auth }), requestId);
    } finally {
      slot.release();
    }
    if (state.status === 'pending') {
      sendJson(
        rc.res,
        200,
        { status: 'pending', status_url: statusUrl },
        state.retryAfter ? { 'retry-after': state.retryAfter } : {},
      );
    } else if (state.status === 'completed') {
      sendJson(rc.res, 200, { status: 'completed', result: state.result });
    } else {
      sendJson(rc.res, 200, { status: 'failed', error: state.error });
    }
  });
  return {
    closeStreams: () => {
      for (const finish of [...streams]) {
        finish(new ProtocolError('temporarily_unavailable', 'The proxy is shutting down; reconnect.'));
      }
    },
  };
}

function callerOf({ auth }: { auth: AgentAuth }): CallerIdentity {
  return { agentId: auth.agent.id, hostId: auth.host.id, userId: auth.agent.userId };
}

/**
 * Relays the upstream's event stream as §5.11 events: `error` and `done` pass through, anything
 * else becomes `data`; a `done` always ends the stream, whatever ends it (upstream end, upstream
 * failure, revocation, the maximum duration).
 */
async function relayStream(
  res: ServerResponse,
  { reply, scrub }: { reply: UpstreamReply; scrub: (text: string) => string },
  authorized: AuthorizedExecution,
  options: ExecuteRouteOptions,
  abort: AbortController,
  open: Set<(error?: ProtocolError) => void>,
): Promise<void> {
  const { ctx, settings } = options;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  res.flushHeaders();
  reply.done();
  let finished = false;
  const finish = (error?: ProtocolError, final = ''): void => {
    if (finished) return;
    finished = true;
    open.delete(finish);
    clearInterval(check);
    clearTimeout(deadline);
    if (error) res.write(formatSse('error', JSON.stringify(error.toBody())));
    res.end(formatSse('done', scrub(final)));
    reply.body.destroy();
  };
  const agentId = authorized.auth.agent.id;
  const check = setInterval(() => {
    // Streaming is use of the agent: it keeps the session alive (§2.4), and is re-checked.
    ctx.usage.recordAgent(agentId, authorized.auth.host.id, ctx.clock.now());
    const problem = streamStillAuthorized(ctx, agentId, authorized.capability.name);
    if (problem) finish(problem);
  }, settings.streamRevocationCheckMs).unref();
  const deadline = setTimeout(
    () => finish(new ProtocolError('stream_timeout')),
    settings.streamMaxDurationMs,
  ).unref();
  // The agent went away: stop relaying and cancel the upstream request (its body is destroyed).
  res.once('close', () => finish());
  open.add(finish);
  const parser = new SseParser();
  // undici's body yields Buffers whatever setEncoding says; a streaming decoder keeps a character
  // split across two chunks whole (decoding each chunk alone would corrupt it).
  const decoder = new TextDecoder('utf-8');
  try {
    for await (const chunk of reply.body) {
      if (finished) break;
      for (const event of parser.push(decoder.decode(chunk as Buffer, { stream: true }))) {
        if (event.event === 'done') {
          finish(undefined, event.data);
          break;
        }
        // Ids are echoed too, so they are scrubbed like the data.
        const id = event.id === undefined ? undefined : scrub(event.id);
        if (event.event === 'error') {
          res.write(formatSse('error', asErrorObject(scrub(event.data)), id));
        } else {
          res.write(formatSse('data', scrub(event.data), id));
        }
      }
    }
    finish();
  } catch {
    if (abort.signal.aborted) finish();
    else finish(new ProtocolError('upstream_unavailable', 'The upstream stream failed.'));
  }
}

/** §5.13: an upstream `error` event's data as an error object. */
function asErrorObject(data: string): string {
  try {
    const value: unknown = JSON.parse(data);
    if (value && typeof value === 'object' && !Array.isArray(value) && 'error' in value) return data;
  } catch {
    // not JSON: wrapped below
  }
  return JSON.stringify({ error: 'upstream_error', message: data });
}

function activity(
  ctx: ProtocolContext,
  auth: AgentAuth,
  request: { name: string; args: Readonly<Record<string, unknown>> },
  outcome: string,
  started: number,
  upstreamStatus: number | null,
  requestId: string,
  message?: string,
): ActivityRecord {
  return {
    at: ctx.clock.now(),
    type: 'execute',
    agentId: auth.agent.id,
    hostId: auth.host.id,
    userId: auth.agent.userId,
    // The name as the agent sent it, bounded: it may not exist in the catalog.
    capability: request.name.slice(0, 128),
    outcome,
    detail: {
      request_id: requestId,
      ...(message !== undefined ? { message } : {}),
      // §11: arguments can hold personal data; recorded only when the policy says so.
      ...(ctx.policy.audit.logArguments ? { arguments: request.args } : {}),
    },
    jti: typeof auth.claims.jti === 'string' ? auth.claims.jti : null,
    latencyMs: Math.round((performance.now() - started) * 1000) / 1000,
    upstreamStatus,
  };
}
