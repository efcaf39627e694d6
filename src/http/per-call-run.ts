/**
 * Runs an approved per-call execution (issue 16 §1) once, after claimPerCall moved its row to
 * `executing`: the agent, host and grant are checked again from the database (they may have been
 * revoked while the person decided), then the arguments against the input schema and the grant's
 * constraints (§2.13, on the request as it will be sent), then the same executor as
 * `POST /capability/execute` (§5.11), holding an upstream slot. The outcome is stored for the
 * agent's poll; a refusal executes nothing and is stored as the call's error.
 *
 * Only a JSON result can wait for a poll: an upstream that answers with an event stream or an
 * async 202 fails the call with `upstream_error` (documented in the README), and a result larger
 * than `approval.per_call_max_result_bytes` with `payload_too_large`.
 */
import { ProtocolError, toProtocolError } from '../errors.js';
import type { ProtocolContext } from '../protocol/context.js';
import {
  checkApprovedVersion,
  checkArgumentConstraints,
  checkSentRequest,
  recheckIfChanged,
  streamStillAuthorized,
  validateArguments,
  type ArgumentValidators,
} from '../protocol/execute.js';
import type { InFlightSlots } from '../protocol/in-flight.js';
import { withServerConstraints } from '../protocol/grant-constraints.js';
import { isGrantEffective } from '../protocol/lifecycle.js';
import { finishPerCall } from '../protocol/per-call-decide.js';
import type { PerCallRecord } from '../storage/types.js';
import { discard } from '../upstream/answers.js';
import { Cancellation } from '../upstream/cancellation.js';
import type { Executor } from '../upstream/executor.js';
import { takeUpstreamSlot } from './in-flight.js';

export interface PerCallRunDeps {
  readonly ctx: ProtocolContext;
  readonly executor: Executor;
  readonly inFlight: InFlightSlots;
  readonly validators: ArgumentValidators;
}

/** Runs the claimed call `r` and stores its outcome; never throws for the call's own failures. */
export async function runPerCall(deps: PerCallRunDeps, r: PerCallRecord, requestId: string): Promise<void> {
  const { ctx } = deps;
  try {
    const outcome = await execute(deps, r, requestId);
    await finishPerCall(ctx, r, outcome);
  } catch (err) {
    const error = toProtocolError(err);
    if (error.code === 'internal_error') {
      ctx.logger.error('per-call execution failed', {
        call_id: r.id,
        error: err instanceof Error ? err.message : String(err),
      });
    }
    await finishPerCall(ctx, r, { error });
  }
}

async function execute(
  { ctx, executor, inFlight, validators }: PerCallRunDeps,
  r: PerCallRecord,
  requestId: string,
): Promise<{ result: unknown; upstreamStatus: number }> {
  // Anything written after this (a revocation) is checked again before the call goes.
  const generation = ctx.cache.generation;
  const problem = await streamStillAuthorized(ctx, r.agentId, r.capability);
  if (problem) throw problem;
  const capability = ctx.catalog.get(r.capability);
  const now = ctx.clock.now();
  const held = (await ctx.store.grants(r.agentId)).find(
    (g) => g.capability === r.capability && isGrantEffective(g, now),
  );
  // A capability removed or blocked since was refused by streamStillAuthorized above.
  if (!capability || !held) {
    throw new ProtocolError('capability_not_granted', `The agent no longer holds ${r.capability}.`);
  }
  checkApprovedVersion(held, capability);
  const grant = withServerConstraints(ctx, held);
  await validateArguments(validators, capability, r.arguments);
  checkArgumentConstraints(grant, r.arguments);
  const agent = await ctx.store.agent(r.agentId);
  const caller = { agentId: r.agentId, hostId: r.hostId, userId: agent?.userId ?? null };
  const call = executor.prepare({ capability, args: r.arguments, caller });
  checkSentRequest(grant, call.sent);

  const slot = takeUpstreamSlot(inFlight, { agentId: r.agentId, hostId: r.hostId });
  // The grant's use (account page), as for any call that goes upstream with it.
  ctx.usage.recordGrant(grant.id, now);
  let outcome: Awaited<ReturnType<Executor['execute']>>;
  const recheck = (): Promise<void> | undefined => recheckIfChanged(ctx, generation, r.agentId, r.capability);
  try {
    await recheck();
    outcome = await executor.execute({
      call,
      caller,
      requestId,
      controller: new Cancellation(),
      once: true,
      beforeSend: recheck,
    });
  } finally {
    slot.release();
  }
  if (outcome.kind === 'stream') {
    discard(outcome.reply);
    throw new ProtocolError(
      'upstream_error',
      'The upstream answered with an event stream; a per-call approval keeps only a JSON result.',
    );
  }
  if (outcome.kind === 'async') {
    throw new ProtocolError(
      'upstream_error',
      'The upstream answered 202 (still running); a per-call approval keeps only a finished JSON result.',
    );
  }
  const bytes = Buffer.byteLength(JSON.stringify(outcome.data) ?? 'null');
  const max = ctx.policy.approval.perCallMaxResultBytes;
  if (bytes > max) {
    throw new ProtocolError(
      'payload_too_large',
      `The upstream's result (${bytes} bytes) is larger than the ${max} bytes a per-call approval keeps (policy approval.per_call_max_result_bytes); it was executed, but its result is not available.`,
      { fields: { upstream_status: outcome.upstreamStatus } },
    );
  }
  return { result: outcome.data, upstreamStatus: outcome.upstreamStatus };
}
