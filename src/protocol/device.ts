/**
 * §7.1 device authorization, the user's side: what someone who opens the verification URI with a
 * code may see of the request behind it, and whether the signed-in approver may decide it here.
 * Without sign-in configured the page is read-only and the operator decides. With it, an approval
 * is bound to a hash of exactly what was shown; approving anything that changes data also needs
 * proof of presence (§8.11, presence.ts).
 */
import { createHash } from 'node:crypto';
import type { ApprovalKind, ApprovalRecord } from '../storage/types.js';
import type { ProtocolContext } from './context.js';
import { linkedDefaults } from './grants.js';
import { CLAIMABLE } from './host-linking.js';
import { normalizeUserCode } from './user-code.js';

export interface DeviceRequest {
  readonly approvalId: string;
  readonly userCode: string;
  /** How the approver was reached (§7.5): by a code they entered, or a CIBA request to them. */
  readonly method: ApprovalRecord['method'];
  readonly kind: ApprovalKind;
  readonly agentName: string;
  readonly hostName: string | null;
  /**
   * RFC 8628 §5.4: what identifies the host beyond the name it chose: its key's RFC 7638
   * thumbprint (the `iss` of its JWTs) and when the host first registered.
   */
  readonly hostKey: {
    readonly thumbprint: string;
    readonly registeredAt: number;
    /** The client IP and user agent the host registered from; null when unknown (issue 16). */
    readonly ip: string | null;
    readonly userAgent: string | null;
  } | null;
  readonly mode: 'delegated' | 'autonomous';
  /** Each requested capability with its description; the constraints the approver would accept. */
  readonly capabilities: readonly {
    readonly name: string;
    readonly description: string | null;
    /** The upstream HTTP method (upper case); GET/HEAD are read-only. */
    readonly method: string | null;
    readonly constraints: Readonly<Record<string, unknown>> | null;
    /** The policy's high_risk: it can change data or act for the user (§8.10: warn). */
    readonly highRisk: boolean;
  }[];
  readonly reason: string | null;
  readonly bindingMessage: string | null;
  readonly expiresAt: number;
  /** The user the agent already acts for (its own or its host's link, §2.9), if any. */
  readonly linkedUser: string | null;
  /**
   * §2.9: when approving links the host to the approver, what its delegated agents will then be
   * granted without asking anyone (the host's defaults and the policy's, never high-risk or
   * blocked ones); empty when approving links nothing. Shown, and counted by the presence rule
   * (§8.11) as approved too: linking grants them.
   */
  readonly linkUnlocks: readonly LinkedDefault[];
  /**
   * §9.3: approving links the host to the approver, and its autonomous agents become theirs with
   * their history (§2.10); what those agents are and did lately, shown before that happens.
   */
  readonly claims: {
    readonly agents: readonly ClaimedAgent[];
    /** Beyond the MAX_CLAIMS_SHOWN listed. */
    readonly more: number;
    /** The host has more agents than MAX_CLAIMS_READ: `more` counts only those read. */
    readonly moreAtLeast: boolean;
  };
}

/** A capability linking a host grants its future delegated agents (DeviceRequest.linkUnlocks). */
export interface LinkedDefault {
  readonly name: string;
  /** The upstream HTTP method (upper case); GET/HEAD are read-only. */
  readonly method: string | null;
  readonly highRisk: false;
}

export interface ClaimedAgent {
  readonly name: string;
  readonly status: string;
  /** Its latest activity, newest first (at most RECENT_CLAIM_ACTIVITY). */
  readonly recent: readonly { readonly at: number; readonly what: string; readonly outcome: string }[];
}

export const MAX_CLAIMS_SHOWN = 5;
/** Agents of the host read for the notice: each page view reads at most this many rows. */
export const MAX_CLAIMS_READ = 1000;
export const RECENT_CLAIM_ACTIVITY = 3;

export type DeviceLookup =
  | { readonly kind: 'found'; readonly request: DeviceRequest }
  /** Well-formed, but no open device-authorization request has it (expired, decided, or never). */
  | { readonly kind: 'not_found'; readonly userCode: string }
  | { readonly kind: 'malformed' };

export async function lookUpDeviceRequest(ctx: ProtocolContext, input: string): Promise<DeviceLookup> {
  const userCode = normalizeUserCode(input);
  if (userCode === undefined) return { kind: 'malformed' };
  const approval = await ctx.store.approvalByUserCode(userCode);
  const open =
    approval !== undefined &&
    approval.status === 'pending' &&
    approval.method === 'device_authorization' &&
    approval.expiresAt > ctx.clock.now();
  const request = open ? await describeApproval(ctx, approval) : undefined;
  return request ? { kind: 'found', request } : { kind: 'not_found', userCode };
}

/** The request an approval asks, as the pages show it; undefined when its agent is gone. */
export async function describeApproval(
  ctx: ProtocolContext,
  approval: ApprovalRecord,
): Promise<DeviceRequest | undefined> {
  const agent = await ctx.store.agent(approval.agentId);
  if (!agent) return undefined;
  const host = await ctx.store.host(approval.hostId);
  return {
    approvalId: approval.id,
    userCode: approval.userCode,
    method: approval.method,
    kind: approval.kind,
    agentName: agent.name,
    hostName: host?.name ?? null,
    hostKey: host
      ? {
          thumbprint: host.thumbprint,
          registeredAt: host.createdAt,
          ip: host.registeredIp ?? null,
          userAgent: host.registeredUserAgent ?? null,
        }
      : null,
    mode: agent.mode,
    capabilities: approval.capabilities.map((c) => ({
      name: c.name,
      description: ctx.catalog.get(c.name)?.description ?? null,
      method: ctx.catalog.get(c.name)?.operation.method.toUpperCase() ?? null,
      constraints: c.constraints ?? null,
      highRisk: ctx.policy.highRisk.has(c.name),
    })),
    reason: approval.reason,
    bindingMessage: approval.bindingMessage,
    expiresAt: approval.expiresAt,
    linkedUser: agent.userId ?? host?.userId ?? null,
    linkUnlocks:
      agent.mode === 'delegated' && host && host.userId === null && agent.userId === null
        ? linkedDefaults(ctx, host).map((name) => ({
            name,
            method: ctx.catalog.get(name)?.operation.method.toUpperCase() ?? null,
            highRisk: false as const,
          }))
        : [],
    claims:
      agent.mode === 'delegated' && host && host.userId === null
        ? await claimsOf(ctx, host.id)
        : { agents: [], more: 0, moreAtLeast: false },
  };
}

/** The autonomous agents of unlinked host `hostId` that approving would claim (§2.10, §9.3). */
async function claimsOf(ctx: ProtocolContext, hostId: string): Promise<DeviceRequest['claims']> {
  // Bounded: an operator-approved host linked to nobody may hold any number of agents, and this
  // runs on every view of the request.
  const read = await ctx.store.agents({ hostId, limit: MAX_CLAIMS_READ + 1 });
  const claimable = read
    .slice(0, MAX_CLAIMS_READ)
    .filter((a) => a.mode === 'autonomous' && CLAIMABLE.has(a.status));
  const agents: ClaimedAgent[] = [];
  for (const a of claimable.slice(0, MAX_CLAIMS_SHOWN)) {
    const recent = await ctx.store.activity({ agentId: a.id, limit: RECENT_CLAIM_ACTIVITY });
    agents.push({
      name: a.name,
      status: a.status,
      recent: recent.map((r) => ({ at: r.at, what: r.capability ?? r.type, outcome: r.outcome })),
    });
  }
  return { agents, more: claimable.length - agents.length, moreAtLeast: read.length > MAX_CLAIMS_READ };
}

/**
 * A hash of everything the page shows about the request. The decision forms carry it, and a
 * decision whose hash no longer matches is refused and the request shown again: what is approved
 * is exactly what was seen.
 */
export function contentHash(r: DeviceRequest): string {
  return createHash('sha256').update(JSON.stringify(r)).digest('base64url');
}

/**
 * Why `userId` may not decide this request on the page, or undefined when they may. Autonomous
 * agents act for nobody, so only the operator admits them (§2.2.2, §8.10); a request of an agent
 * that already acts for a user is that user's alone (§2.9). A CIBA request reaches the page only
 * through its addressee's inbox (src/protocol/inbox.ts); it is never found by code.
 */
export function decisionRefusal(r: DeviceRequest, userId: string): string | undefined {
  if (r.mode === 'autonomous') {
    return 'This is an autonomous agent: it would act for the service itself, not for you, so only the operator can decide it.';
  }
  if (r.linkedUser !== null && r.linkedUser !== userId) {
    return 'This agent acts for another user; only they can decide its requests.';
  }
  return undefined;
}

/** Methods that only read (RFC 9110 §9.2.1 safe methods the proxy forwards). */
const READ_ONLY = new Set(['GET', 'HEAD']);

/** Whether a capability of this upper-case method only reads; an unknown method does not. */
export function isReadOnlyMethod(method: string | null): boolean {
  return method !== null && READ_ONLY.has(method);
}
