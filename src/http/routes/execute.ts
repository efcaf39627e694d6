/**
 * §5.11 `POST /capability/execute` and the async status URL `GET /capability/status/{id}`.
 * Execute's steps: agent token (audience: the execute location) → limits → replay record →
 * body → authorization (grant) → validation → constraints → capability limit → per-call approval
 * (policy `capabilities.per_call`: `202` pending, nothing sent until a person approves these exact
 * arguments; protocol/per-call.ts) → the upstream call → the answer (`{data}`, an event stream,
 * or `202 {status: "pending", status_url}`); every accepted attempt leaves an activity record
 * (§11). The status URL serves async jobs (`job_…`) and per-call approvals (`call_…`) alike.
 */
import type { ExecutionSettings } from '../../config/settings.js';
import { ProtocolError, toProtocolError } from '../../errors.js';
import { executionRecord } from '../../protocol/execution-record.js';
import { authorizeStatusRead, openAsyncJob, statusUrlOf } from '../../protocol/async-jobs.js';
import { isPerCallId, openPerCall, PENDING_APPROVAL } from '../../protocol/per-call.js';
import { outcomeUnknownAfterMs, pollPerCall } from '../../protocol/per-call-decide.js';
import type { AgentAuth } from '../../protocol/authenticate.js';
import { withDocumentsNow, type ProtocolContext } from '../../protocol/context.js';
import { cachedGrants, loadGrants } from '../../protocol/grants.js';
import {
  authorizeCapability,
  authorizeExecution,
  checkArgumentConstraints,
  checkSentRequest,
  readExecuteBody,
  recheckIfChanged,
  validateArguments,
  type ArgumentValidators,
  type AuthorizedExecution,
} from '../../protocol/execute.js';
import type { ExecutionLog } from '../../protocol/execution-log.js';
import type { InFlightSlots, Slot } from '../../protocol/in-flight.js';
import { Cancellation } from '../../upstream/cancellation.js';
import type { CallerIdentity, ExecutionOutcome, Executor, PreparedCall } from '../../upstream/executor.js';
import { traceContext, type TraceContext } from '../../upstream/trace-context.js';
import { takeUpstreamSlot } from '../in-flight.js';
import { need, step, type Exchange } from '../pipeline.js';
import type { RateLimits } from '../rate-limits.js';
import { sendJson, sendJsonText } from '../respond.js';
import type { Router } from '../router.js';
import { relayStream } from '../sse-relay.js';
import { jsonBody } from '../steps/body.js';
import { principalLimits } from '../steps/limits.js';
import { replayRecord } from '../steps/replay.js';
import { agentToken, type TokenStepOptions } from '../steps/tokens.js';

export interface ExecuteRouteOptions extends TokenStepOptions {
  readonly ctx: ProtocolContext;
  readonly limits: RateLimits;
  /** Fair share: caps on upstream calls in flight per agent, per host and in total. */
  readonly inFlight: InFlightSlots;
  /** The executor and validators of the catalog in force, swapped together on reload. */
  readonly engine: () => ExecutionEngine;
  readonly log: ExecutionLog;
  readonly settings: ExecutionSettings;
  readonly maxBodyBytes: number;
}

/** Built from one catalog: a request keeps the pair it started with across a reload. */
export interface ExecutionEngine {
  readonly executor: Executor;
  readonly validators: ArgumentValidators;
}

/** What the composition root needs at shutdown. */
export interface ExecuteRoutes {
  /** Ends every open stream (error `temporarily_unavailable`, then `done`), so shutdown is not held up. */
  closeStreams(): void;
}

/** One execution's state, filled step by step. */
interface Execution {
  readonly started: number;
  /** ctx.cache's generation when the request began: a write since means checking again (recheckIfChanged). */
  readonly generation: number;
  /** The context with the catalog and policy of `engine`'s time, for every later step. */
  ctx?: ProtocolContext;
  engine?: ExecutionEngine;
  request?: { name: string; args: Readonly<Record<string, unknown>> };
  authorized?: AuthorizedExecution;
  call?: PreparedCall;
  /** The upstream slot this execution holds until it is over (fair share). */
  slot?: Slot;
  abort?: Cancellation;
  outcome?: ExecutionOutcome;
  /** Per-call approval: answered 202; the upstream is called only once a person approves. */
  deferred?: boolean;
  trace?: TraceContext;
}

export function executeRoutes(router: Router, options: ExecuteRouteOptions): ExecuteRoutes {
  const { ctx, limits, engine, log, settings } = options;
  const streams = new Set<(error?: ProtocolError) => void>();

  /** An async job's `202` (its status URL stored first) or a relayed event stream. */
  const answerLater = async (
    x: Exchange,
    s: Execution,
    outcome: Exclude<ExecutionOutcome, { kind: 'data' }>,
    authorized: AuthorizedExecution,
  ): Promise<void> => {
    if (outcome.kind === 'async') {
      const statusUrl = await openAsyncJob(ctx, {
        agentId: authorized.auth.agent.id,
        capability: authorized.capability.name,
        upstreamUrl: outcome.upstreamUrl,
        statusCapability: outcome.statusCapability,
        ttlMs: settings.asyncJobTtlMs,
      });
      sendJson(
        x.res,
        202,
        { status: 'pending', status_url: statusUrl },
        outcome.retryAfter ? { 'retry-after': outcome.retryAfter } : {},
      );
    } else {
      await relayStream(x.res, outcome, authorized, { ctx, settings }, need(s.abort, 'abort'), streams);
    }
  };

  router.addWithState<Execution>(
    'POST',
    '/capability/execute',
    [
      agentToken(options, () => [ctx.executeLocation()]),
      principalLimits(limits),
      replayRecord(ctx),
      jsonBody(options.maxBodyBytes),
      step('parse', (x, s) => {
        s.request = readExecuteBody(need(x.body, 'body'));
        // One catalog, policy, executor and validators for every step from here, whatever a
        // reload swaps while this request waits.
        s.engine = engine();
        s.ctx = withDocumentsNow(ctx);
        x.decision.capability = s.ctx.catalog.get(s.request.name) ? s.request.name : null;
      }),
      step('authorize', (x, s) => {
        const auth = need(x.agent, 'agent');
        const { name, args } = need(s.request, 'request');
        const pinned = need(s.ctx, 'ctx');
        // The grants from the hot cache: at once on a hit, only a miss waits for the store.
        const grants = cachedGrants(pinned, auth.agent.id);
        if (grants === undefined) {
          return loadGrants(pinned, auth.agent.id).then((loaded) => {
            s.authorized = { auth, args, ...authorizeCapability(pinned, auth, name, loaded) };
          });
        }
        s.authorized = { auth, args, ...authorizeCapability(pinned, auth, name, grants) };
        return undefined;
      }),
      step('validate', (_x, s) => {
        const { capability, args } = need(s.authorized, 'authorized');
        return validateArguments(need(s.engine, 'engine').validators, capability, args);
      }),
      step('prepare', (x, s) => {
        const { capability, args } = need(s.authorized, 'authorized');
        s.call = need(s.engine, 'engine').executor.prepare({
          capability,
          args,
          caller: callerOf(need(x.agent, 'agent')),
        });
      }),
      // §2.13 on the arguments, then on what the upstream will actually receive (pins, styles).
      step('constraints', (_x, s) => {
        const { grant, args } = need(s.authorized, 'authorized');
        checkArgumentConstraints(grant, args);
        checkSentRequest(grant, need(s.call, 'call').sent);
      }),
      step('capability-limit', (_x, s) => {
        const { capability, auth } = need(s.authorized, 'authorized');
        return limits.capability(capability.name, auth.agent.id, auth.host.id, auth.agent.userId);
      }),
      // Issue 16 §1: a per-call capability stops here, after every check, as a §5.11 async
      // execution waiting for its addressee's approval of these exact arguments.
      // Synchronous unless the capability is per-call: the hot path awaits nothing here.
      step('per-call', (x, s) => {
        const { capability, auth, args } = need(s.authorized, 'authorized');
        const pinned = need(s.ctx, 'ctx');
        if (!pinned.policy.perCall.has(capability.name)) return undefined;
        return openPerCall(pinned, auth, { capability: capability.name, args }).then((statusUrl) => {
          // Answering ends the route here (pipeline.ts): no slot, no upstream call.
          s.deferred = true;
          // The request log and executions_total say "waiting for a person", not "executed".
          x.decision.reason = PENDING_APPROVAL;
          sendJson(x.res, 202, { status: 'pending', status_url: statusUrl });
        });
      }),
      // Fair share (issue 10 class 7): a slot for this agent and host, held until the call is
      // over (data, 202, failure, disconnect, stream end) and given back by the last word below.
      step('upstream-slot', (_x, s) => {
        const { auth } = need(s.authorized, 'authorized');
        s.slot = takeUpstreamSlot(options.inFlight, { agentId: auth.agent.id, hostId: auth.host.id });
      }),
      step('upstream', async (x, s) => {
        const authorized = need(s.authorized, 'authorized');
        // The grant's use (account page), counted in memory and flushed in batches: no write here.
        ctx.usage.recordGrant(authorized.grant.id, ctx.clock.now());
        const abort = new Cancellation();
        s.abort = abort;
        // Only an agent that goes away mid-call cancels it.
        x.abandoned = () => abort.abort();
        // Against the live context: a revocation, or a reload that blocks the capability, since
        // this request began stops it here (and again after a token fetch: beforeSend).
        const recheck = (): Promise<void> | undefined =>
          recheckIfChanged(ctx, s.generation, authorized.auth.agent.id, authorized.capability.name);
        const changed = recheck();
        if (changed) await changed;
        s.outcome = await need(s.engine, 'engine').executor.execute({
          call: need(s.call, 'call'),
          caller: callerOf(authorized.auth),
          requestId: x.requestId,
          traceparent: traceOf(x, s).traceparent,
          controller: abort,
          beforeSend: recheck,
        });
        x.decision.upstream_status = s.outcome.upstreamStatus;
      }),
      // Synchronous for a plain answer (the hot path); an async job or a stream is awaited.
      step('respond', (x, s) => {
        const outcome = need(s.outcome, 'outcome');
        const authorized = need(s.authorized, 'authorized');
        if (outcome.kind === 'data') {
          // A JSON answer goes out as its own text inside the envelope: no second serialization.
          if (outcome.json !== undefined) sendJsonText(x.res, 200, `{"data":${outcome.json}}`);
          else sendJson(x.res, 200, { data: outcome.data });
          return undefined;
        }
        return answerLater(x, s, outcome, authorized);
      }),
    ],
    // Every field from the start: one shape, where adding them step by step grew the object.
    (): Execution => ({
      started: performance.now(),
      generation: ctx.cache.generation,
      ctx: undefined,
      engine: undefined,
      request: undefined,
      authorized: undefined,
      call: undefined,
      slot: undefined,
      abort: undefined,
      outcome: undefined,
      deferred: undefined,
      trace: undefined,
    }),
    (x, s, failure) => {
      s.slot?.release();
      // Every execute's record carries a trace id, also one refused before the upstream call.
      traceOf(x, s);
      // Recorded once the token was accepted and the body read: refusals before that (bad token,
      // replay, limits) are not the agent's acts and must not cost storage.
      if (!s.request || !x.agent) return;
      const e = failure === undefined ? undefined : toProtocolError(failure);
      const upstreamStatus =
        typeof e?.fields.upstream_status === 'number'
          ? e.fields.upstream_status
          : (s.outcome?.upstreamStatus ?? null);
      log.record(
        executionRecord(ctx, {
          auth: x.agent,
          capability: s.request.name,
          args: s.request.args,
          outcome: e ? e.code : s.deferred ? PENDING_APPROVAL : 'success',
          latencyMs: performance.now() - s.started,
          upstreamStatus,
          requestId: x.requestId,
          ...(e ? { message: e.message } : {}),
        }),
      );
    },
  );

  router.add('GET', '/capability/status/:id', [
    // §5.11: a fresh agent JWT per poll; its audience may be the status URL itself.
    agentToken(options, (x) => [statusUrlOf(ctx, x.params.id ?? ''), ctx.executeLocation(), ctx.issuer()]),
    principalLimits(limits),
    replayRecord(ctx),
    step('poll', async (x) => {
      const auth = need(x.agent, 'agent');
      const id = x.params.id ?? '';
      // As for execute: one policy for the whole poll, and a recheck if anything is written meanwhile.
      const generation = ctx.cache.generation;
      const pinned = withDocumentsNow(ctx);
      const current = engine();
      if (isPerCallId(id)) {
        const unknownAfter = outcomeUnknownAfterMs(current.executor.longestCallMs());
        const state = await pollPerCall(ctx, auth, id, unknownAfter);
        sendJson(
          x.res,
          200,
          state.status === 'pending' ? { ...state, status_url: statusUrlOf(ctx, id) } : state,
        );
        return;
      }
      const { job, capability } = await authorizeStatusRead(pinned, auth, id);
      x.decision.capability = capability.name;
      const trace = traceContext(x.req.headers.traceparent);
      x.decision.trace_id = trace.traceId;
      // A status poll is an upstream call too: it holds a slot while it runs.
      const slot = takeUpstreamSlot(options.inFlight, { agentId: auth.agent.id, hostId: auth.host.id });
      const started = performance.now();
      // The call the poll made last (the status URL, or the result a 303 led to): what §11 records.
      let polled: { readonly name: string; readonly args: Readonly<Record<string, unknown>> } | undefined;
      let failure: unknown;
      let state: Awaited<ReturnType<Executor['poll']>>;
      try {
        state = await current.executor.poll({
          upstreamUrl: job.upstreamUrl,
          statusCapability: job.statusCapability,
          caller: callerOf(auth),
          requestId: x.requestId,
          traceparent: trace.traceparent,
          // Issue 10, class 4: the status URL (and a 303 to the result) is fetched only as a call the
          // agent could make itself: its grant for that GET capability, and the grant's constraints.
          authorize: async (call) => {
            // A per-call capability runs only once a person approves its exact arguments: never
            // as another call's status URL or result, which no one approved.
            polled = call;
            if (pinned.policy.perCall.has(call.name)) throw perCallOnlyDirectly(call.name);
            const { grant } = await authorizeExecution(pinned, auth, call, current.validators);
            checkSentRequest(grant, call.sent);
            // The call's own limits too (per_capability, high_risk), as for a direct call: polling
            // must not be a way around them.
            await limits.capability(call.name, auth.agent.id, auth.host.id, auth.agent.userId);
            await recheckIfChanged(ctx, generation, auth.agent.id, call.name);
            // A use of that grant, as a direct call is (account page).
            ctx.usage.recordGrant(grant.id, ctx.clock.now());
          },
        });
      } catch (err) {
        failure = err;
        throw err;
      } finally {
        slot.release();
        // §11: each poll that read a job is a capability call with the service's credentials,
        // recorded as an execute is, refused or not, with the job it read.
        const e = failure === undefined ? undefined : toProtocolError(failure);
        log.record(
          executionRecord(ctx, {
            auth,
            capability: polled?.name ?? job.statusCapability ?? job.capability,
            args: polled?.args ?? {},
            outcome: e ? e.code : 'success',
            latencyMs: performance.now() - started,
            upstreamStatus: typeof e?.fields.upstream_status === 'number' ? e.fields.upstream_status : null,
            requestId: x.requestId,
            ...(e ? { message: e.message } : {}),
            extra: { status_of: { job: job.id, capability: job.capability } },
          }),
        );
      }
      if (state.status === 'pending') {
        sendJson(
          x.res,
          200,
          { status: 'pending', status_url: statusUrlOf(ctx, id) },
          state.retryAfter ? { 'retry-after': state.retryAfter } : {},
        );
      } else if (state.status === 'completed') {
        sendJson(x.res, 200, { status: 'completed', result: state.result });
      } else {
        sendJson(x.res, 200, { status: 'failed', error: state.error });
      }
    }),
  ]);

  return {
    closeStreams: () => {
      for (const finish of [...streams]) {
        finish(new ProtocolError('temporarily_unavailable', 'The proxy is shutting down; reconnect.'));
      }
    },
  };
}

function callerOf(auth: AgentAuth): CallerIdentity {
  return { agentId: auth.agent.id, hostId: auth.host.id, userId: auth.agent.userId };
}

/** The execution's trace context, made once (the agent's trace id if valid) and noted in its record. */
function traceOf(x: Exchange, s: Execution): TraceContext {
  s.trace ??= traceContext(x.req.headers.traceparent);
  x.decision.trace_id = s.trace.traceId;
  return s.trace;
}

function perCallOnlyDirectly(name: string): ProtocolError {
  return new ProtocolError(
    'capability_not_granted',
    `Capability ${name} needs a person's approval of each call, so the status URL that leads to it is not followed; execute ${name} itself (§5.11).`,
  );
}
