/**
 * The operator API under `/admin/`, mounted only when an admin token is configured. Every route
 * starts with the admin token step (constant-time comparison, failures limited per client IP).
 */
import { ProtocolError } from '../../errors.js';
import { revokeAgent } from '../../protocol/agents.js';
import { approve, deny } from '../../protocol/approval-decisions.js';
import { expireApprovals } from '../../protocol/approvals.js';
import { cleanUserAgent, type DecisionOrigin } from '../../protocol/decision-record.js';
import { normalizeUserCode } from '../../protocol/user-code.js';
import { iso, type ProtocolContext } from '../../protocol/context.js';
import {
  linkHostTo,
  parsePreRegistration,
  preRegisterHost,
  revokeHost,
  unlinkHost,
} from '../../protocol/hosts.js';
import { agentView, hostView } from '../../protocol/views.js';
import { currentAgent } from '../../protocol/lifecycle.js';
import type { ActivityRecord, AgentRecord, ApprovalRecord, HostStatus } from '../../storage/types.js';
import { need, step, type Exchange, type SharedStep } from '../pipeline.js';
import { adminUserRoutes, MAX_USER_ID } from './admin-users.js';
import { adminPerCallRoutes } from './admin-per-call.js';
import { sendJson } from '../respond.js';
import { nextCursor, pageOf } from '../listing-page.js';
import type { Router } from '../router.js';
import { jsonBody } from '../steps/body.js';
import { secretToken, type TokenStepOptions } from '../steps/tokens.js';

export interface AdminRouteOptions extends TokenStepOptions {
  readonly ctx: ProtocolContext;
  readonly adminToken: string;
  readonly maxBodyBytes: number;
  /** Writes queued execution records first, so the activity listing is never behind. */
  readonly flushActivity?: () => Promise<void>;
  /** How long after its claim a per-call approval's call could still be running (per-call-decide.ts). */
  readonly perCallUnknownAfterMs: () => number;
  /** sign_in.first_passkey is operator_code: the operator issues first-passkey enrolment codes. */
  readonly firstPasskeyNeedsCode: boolean;
}

const ACTOR = 'admin';

/** An operator API decision's record: the admin token, and where the call came from (issue 16). */
function operatorOrigin(x: Exchange): DecisionOrigin {
  return {
    authMethod: 'admin_token',
    ip: x.clientIp,
    userAgent: cleanUserAgent(x.req.headers['user-agent']),
  };
}

function optionalString(body: Readonly<Record<string, unknown>>, key: string, max = 500): string | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || v === '' || v.length > max) {
    throw new ProtocolError(
      'invalid_request',
      `${key} must be a non-empty string of at most ${max} characters.`,
    );
  }
  return v;
}

/** Agents shown inline with one host (`GET /admin/hosts/:id`). */
const HOST_AGENTS_SHOWN = 100;
export function adminRoutes(router: Router, options: AdminRouteOptions): void {
  const { ctx, maxBodyBytes } = options;

  // One token check for the whole API, then (for changes) the body, then the action.
  const adminToken = secretToken(options, 'admin token', [options.adminToken]);
  const read = (name: string, action: (x: Exchange) => void | Promise<void>): SharedStep[] => [
    adminToken,
    step(name, action),
  ];
  const change = (name: string, action: (x: Exchange) => void | Promise<void>): SharedStep[] => [
    adminToken,
    jsonBody(maxBodyBytes, { optional: true }),
    step(name, action),
  ];
  const body = (x: Exchange): Readonly<Record<string, unknown>> => need(x.body, 'body');

  router.add(
    'GET',
    '/admin/approvals',
    read('list-approvals', async ({ res, url }) => {
      await expireApprovals(ctx);
      const agentId = url.searchParams.get('agent_id') ?? undefined;
      // The code a user read off the device page (§7.1), as they typed it.
      const codeParam = url.searchParams.get('user_code');
      const userCode = codeParam === null ? undefined : normalizeUserCode(codeParam);
      if (codeParam !== null && userCode === undefined) {
        throw new ProtocolError(
          'invalid_request',
          'user_code is not a user code (eight letters, like WDJB-MJHT).',
        );
      }
      const page = pageOf(url);
      // A user code names one approval: looked up by its unique index, not found in a page.
      const byCode = userCode === undefined ? undefined : await ctx.store.approvalByUserCode(userCode);
      const listed =
        userCode === undefined
          ? await ctx.store.approvals({ status: 'pending', ...(agentId ? { agentId } : {}), ...page })
          : [];
      const approvals =
        userCode === undefined
          ? listed
          : [byCode].filter(
              (a): a is ApprovalRecord =>
                a !== undefined && a.status === 'pending' && (!agentId || a.agentId === agentId),
            );
      const names = new Map<string, string | undefined>();
      for (const a of approvals) {
        if (!names.has(a.agentId)) names.set(a.agentId, (await ctx.store.agent(a.agentId))?.name);
      }
      sendJson(res, 200, {
        ...nextCursor(listed, page.limit),
        approvals: approvals.map((a) => ({
          id: a.id,
          kind: a.kind,
          agent_id: a.agentId,
          host_id: a.hostId,
          user_code: a.userCode,
          method: a.method,
          capabilities: a.capabilities.map((c) => ({
            name: c.name,
            ...(c.constraints ? { constraints: c.constraints } : {}),
          })),
          ...(a.reason ? { reason: a.reason } : {}),
          ...(a.loginHint ? { login_hint: a.loginHint } : {}),
          ...(a.bindingMessage ? { binding_message: a.bindingMessage } : {}),
          agent_name: names.get(a.agentId),
          created_at: iso(a.createdAt),
          expires_at: iso(a.expiresAt),
        })),
      });
    }),
  );

  router.add(
    'POST',
    '/admin/approvals/:id/approve',
    change('approve', async (rc) => {
      const b = body(rc);
      const caps = b.capabilities;
      if (caps !== undefined && (!Array.isArray(caps) || caps.some((c) => typeof c !== 'string'))) {
        throw new ProtocolError('invalid_request', 'capabilities must be an array of capability names.');
      }
      const constraints = b.constraints;
      if (
        constraints !== undefined &&
        (constraints === null || typeof constraints !== 'object' || Array.isArray(constraints))
      ) {
        throw new ProtocolError('invalid_request', 'constraints must be an object keyed by capability name.');
      }
      const userId = optionalString(b, 'user_id', MAX_USER_ID);
      const reason = optionalString(b, 'reason');
      const decision = await approve(ctx, rc.params.id ?? '', {
        ...(userId ? { userId } : {}),
        ...(caps ? { capabilities: caps as string[] } : {}),
        ...(constraints ? { constraints: constraints as Record<string, unknown> } : {}),
        ...(reason ? { reason } : {}),
        actor: ACTOR,
        origin: operatorOrigin(rc),
      });
      sendJson(rc.res, 200, {
        id: decision.approval.id,
        status: decision.approval.status,
        approved: decision.approved,
        denied: decision.denied,
        agent: agentView(ctx, decision.agent, await ctx.store.grants(decision.agent.id), undefined, {
          audit: true,
        }),
      });
    }),
  );

  router.add(
    'POST',
    '/admin/approvals/:id/deny',
    change('deny', async (rc) => {
      const b = body(rc);
      const reason = optionalString(b, 'reason');
      const decision = await deny(ctx, rc.params.id ?? '', {
        ...(reason ? { reason } : {}),
        actor: ACTOR,
        origin: operatorOrigin(rc),
      });
      sendJson(rc.res, 200, {
        id: decision.approval.id,
        status: decision.approval.status,
        denied: decision.denied,
        agent: agentView(ctx, decision.agent, await ctx.store.grants(decision.agent.id), undefined, {
          audit: true,
        }),
      });
    }),
  );

  router.add(
    'GET',
    '/admin/hosts',
    read('list-hosts', async ({ res, url }) => {
      const status = url.searchParams.get('status') ?? undefined;
      const userId = url.searchParams.get('user_id') ?? undefined;
      const page = pageOf(url);
      const hosts = await ctx.store.hosts({
        ...(status ? { status: status as HostStatus } : {}),
        ...(userId ? { userId } : {}),
        ...page,
      });
      sendJson(res, 200, { hosts: hosts.map(hostView), ...nextCursor(hosts, page.limit) });
    }),
  );

  router.add(
    'POST',
    '/admin/hosts',
    change('pre-register-host', async (rc) => {
      const input = parsePreRegistration(body(rc));
      const { host, created } = await preRegisterHost(ctx, input, ACTOR);
      sendJson(rc.res, created ? 201 : 200, host);
    }),
  );

  router.add(
    'GET',
    '/admin/hosts/:id',
    read('show-host', async ({ res, params }) => {
      const host = await ctx.store.host(params.id ?? '');
      if (!host) throw new ProtocolError('host_not_found', `No host "${params.id ?? ''}".`);
      // The first page of the host's agents (a host may hold any number): the rest are listed by
      // GET /admin/agents?host_id=…, which `agents_next` points to.
      const agents = await ctx.store.agents({ hostId: host.id, limit: HOST_AGENTS_SHOWN });
      sendJson(res, 200, {
        ...hostView(host),
        agents: agents.map((a) => ({
          agent_id: a.id,
          name: a.name,
          status: a.status,
          mode: a.mode,
        })),
        ...(agents.length === HOST_AGENTS_SHOWN
          ? { agents_next: `/admin/agents?host_id=${encodeURIComponent(host.id)}` }
          : {}),
      });
    }),
  );

  router.add(
    'POST',
    '/admin/hosts/:id/link',
    change('link-host', async (rc) => {
      const userId = optionalString(body(rc), 'user_id', MAX_USER_ID);
      if (!userId) throw new ProtocolError('invalid_request', 'user_id is required.');
      sendJson(rc.res, 200, await linkHostTo(ctx, rc.params.id ?? '', userId));
    }),
  );

  router.add(
    'POST',
    '/admin/hosts/:id/unlink',
    change('unlink-host', async (rc) => {
      sendJson(rc.res, 200, await unlinkHost(ctx, rc.params.id ?? ''));
    }),
  );

  router.add(
    'POST',
    '/admin/hosts/:id/revoke',
    change('revoke-host', async (rc) => {
      sendJson(rc.res, 200, await revokeHost(ctx, rc.params.id ?? '', ACTOR));
    }),
  );

  router.add(
    'GET',
    '/admin/agents',
    read('list-agents', async ({ res, url }) => {
      const hostId = url.searchParams.get('host_id') ?? undefined;
      const status = url.searchParams.get('status') ?? undefined;
      const userId = url.searchParams.get('user_id') ?? undefined;
      // Lifetime clocks applied first (§2.4), so an agent past its TTL shows as expired here too.
      const page = pageOf(url);
      const stored = await ctx.store.agents({
        ...(hostId ? { hostId } : {}),
        ...(userId ? { userId } : {}),
        ...page,
      });
      const current: AgentRecord[] = [];
      for (const a of stored) current.push(await currentAgent(ctx, a));
      const agents = current.filter((a) => !status || a.status === status);
      sendJson(res, 200, {
        ...nextCursor(stored, page.limit),
        agents: agents.map((a) => ({
          agent_id: a.id,
          host_id: a.hostId,
          name: a.name,
          status: a.status,
          mode: a.mode,
          user_id: a.userId,
          created_at: iso(a.createdAt),
        })),
      });
    }),
  );

  router.add(
    'GET',
    '/admin/agents/:id',
    read('show-agent', async ({ res, params }) => {
      const stored = await ctx.store.agent(params.id ?? '');
      if (!stored) throw new ProtocolError('agent_not_found', `No agent "${params.id ?? ''}".`);
      const agent = await currentAgent(ctx, stored);
      const grants = await ctx.store.grants(agent.id);
      sendJson(res, 200, agentView(ctx, agent, grants, await ctx.store.host(agent.hostId), { audit: true }));
    }),
  );

  router.add(
    'POST',
    '/admin/agents/:id/revoke',
    change('revoke-agent', async (rc) => {
      sendJson(rc.res, 200, await revokeAgent(ctx, rc.params.id ?? '', { by: ACTOR }));
    }),
  );

  adminPerCallRoutes(router, {
    ctx,
    read,
    change,
    reasonOf: (x) => optionalString(body(x), 'reason'),
    unknownAfterMs: options.perCallUnknownAfterMs,
  });

  adminUserRoutes(router, {
    ctx,
    firstPasskeyNeedsCode: options.firstPasskeyNeedsCode,
    read,
    change,
    bodyOf: body,
    stringOf: (x, key, max) => optionalString(body(x), key, max),
    originOf: operatorOrigin,
  });

  router.add(
    'GET',
    '/admin/activity',
    read('activity', async ({ res, url }) => {
      await options.flushActivity?.();
      const q = url.searchParams;
      const limit = q.get('limit') === null ? 100 : Number(q.get('limit'));
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
        throw new ProtocolError('invalid_request', 'limit must be a whole number from 1 to 1000.');
      }
      const time = (key: string): number | undefined => {
        const v = q.get(key);
        if (v === null) return undefined;
        const t = Date.parse(v);
        if (Number.isNaN(t)) throw new ProtocolError('invalid_request', `${key} must be an ISO 8601 time.`);
        return t;
      };
      const cursor = q.get('cursor');
      if (cursor !== null && !/^\d{1,15}$/.test(cursor))
        throw new ProtocolError('invalid_request', 'cursor is not valid.');
      const since = time('since');
      const until = time('until');
      const rows = await ctx.store.activity({
        ...(q.get('agent_id') ? { agentId: q.get('agent_id') as string } : {}),
        ...(q.get('host_id') ? { hostId: q.get('host_id') as string } : {}),
        ...(q.get('capability') ? { capability: q.get('capability') as string } : {}),
        ...(since !== undefined ? { since } : {}),
        ...(until !== undefined ? { until } : {}),
        ...(cursor !== null ? { beforeId: Number(cursor) } : {}),
        limit,
      });
      sendJson(res, 200, {
        activity: rows.map(activityView),
        next_cursor: rows.length === limit ? String(rows[rows.length - 1]?.id ?? '') : null,
      });
    }),
  );
}

function activityView(r: ActivityRecord): Record<string, unknown> {
  return {
    id: r.id,
    at: iso(r.at),
    type: r.type,
    agent_id: r.agentId,
    host_id: r.hostId,
    user_id: r.userId,
    capability: r.capability,
    outcome: r.outcome,
    ...(r.detail ? { detail: r.detail } : {}),
    ...(r.jti ? { jti: r.jti } : {}),
    ...(r.latencyMs !== null ? { latency_ms: r.latencyMs } : {}),
    ...(r.upstreamStatus !== null ? { upstream_status: r.upstreamStatus } : {}),
  };
}
