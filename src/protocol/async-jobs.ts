/**
 * §5.11 async executions: the job a `202` opens, and who may read it. The status URL lives on
 * the proxy's own origin; only the agent that started the execution may poll it, and only while
 * it still holds the capability.
 */
import { randomBytes } from 'node:crypto';
import { ProtocolError } from '../errors.js';
import type { Capability } from '../openapi/types.js';
import type { AsyncJobRecord } from '../storage/types.js';
import type { AgentAuth } from './authenticate.js';
import { checkTokenCovers } from './capability-claim.js';
import type { ProtocolContext } from './context.js';
import { cachedGrants, loadGrants } from './grants.js';
import { isGrantEffective } from './lifecycle.js';

export const STATUS_PATH = '/capability/status/';

/**
 * The most async jobs one agent keeps (README "Bounds"): each open job is a row of up to 4 KiB
 * for `execution.async_job_ttl`, and an agent may start one per request within its rate limit.
 * Past it, a new job forgets the agent's oldest, whose status URL then answers
 * `execution_not_found`, as an expired one does.
 */
export const MAX_ASYNC_JOBS_PER_AGENT = 1_000;

export function statusUrlOf(ctx: ProtocolContext, jobId: string): string {
  return `${ctx.issuer()}${STATUS_PATH}${jobId}`;
}

/** Stores the job of an accepted async execution; returns its status URL. */
export async function openAsyncJob(
  ctx: ProtocolContext,
  job: {
    agentId: string;
    capability: string;
    upstreamUrl: string;
    /** The GET capability the status URL is a call of (issue 10, class 4). */
    statusCapability: string;
    ttlMs: number;
  },
): Promise<string> {
  const now = ctx.clock.now();
  const id = `job_${randomBytes(18).toString('base64url')}`;
  await ctx.store.insertAsyncJob({
    id,
    agentId: job.agentId,
    capability: job.capability,
    upstreamUrl: job.upstreamUrl,
    statusCapability: job.statusCapability,
    createdAt: now,
    expiresAt: now + job.ttlMs,
  });
  await ctx.store.forgetOlderAsyncJobs(job.agentId, MAX_ASYNC_JOBS_PER_AGENT);
  return statusUrlOf(ctx, id);
}

/**
 * The job `jobId` as `auth`'s agent may read it: it exists and has not expired, it is this
 * agent's (§5.11), the poll JWT's `capabilities` claim (when present) names the job's capability
 * (§4.3: a poll asks for that capability's result), and the agent still holds an effective grant
 * for it.
 */
export async function authorizeStatusRead(
  ctx: ProtocolContext,
  auth: AgentAuth,
  jobId: string,
): Promise<{ job: AsyncJobRecord; capability: Capability }> {
  const job = await ctx.store.asyncJob(jobId);
  const now = ctx.clock.now();
  if (!job || job.expiresAt <= now) {
    throw new ProtocolError(
      'execution_not_found',
      'No async execution with that id exists, or it has expired.',
    );
  }
  if (job.agentId !== auth.agent.id) {
    throw new ProtocolError('unauthorized', 'This execution belongs to another agent.');
  }
  checkTokenCovers(ctx, auth, job.capability);
  const capability = ctx.catalog.get(job.capability);
  const grants = cachedGrants(ctx, auth.agent.id) ?? (await loadGrants(ctx, auth.agent.id));
  const granted = grants.some((g) => g.capability === job.capability && isGrantEffective(g, now));
  if (!capability || !granted) {
    throw new ProtocolError('capability_not_granted', `The agent no longer holds ${job.capability}.`);
  }
  return { job, capability };
}
