/**
 * §7.1 device authorization, the user's side: what someone who opens the verification URI with a
 * code may see of the request behind it. Read-only on purpose: deciding stays with the operator
 * API (or the operator's own portal, `approval.verification_uri`), because an agent that controls
 * the user's browser could otherwise approve its own request (§8.11).
 */
import type { ApprovalKind } from '../storage/types.js';
import type { ProtocolContext } from './context.js';
import { normalizeUserCode } from './user-code.js';

export interface DeviceRequest {
  readonly userCode: string;
  readonly kind: ApprovalKind;
  readonly agentName: string;
  readonly hostName: string | null;
  readonly mode: 'delegated' | 'autonomous';
  /** Each requested capability with its description; the constraints the approver would accept. */
  readonly capabilities: readonly {
    readonly name: string;
    readonly description: string | null;
    readonly constraints: Readonly<Record<string, unknown>> | null;
    /** The policy's high_risk: it can change data or act for the user (§8.10: warn). */
    readonly highRisk: boolean;
  }[];
  readonly reason: string | null;
  readonly expiresAt: number;
}

export type DeviceLookup =
  | { readonly kind: 'found'; readonly request: DeviceRequest }
  /** Well-formed, but no open device-authorization request has it (expired, decided, or never). */
  | { readonly kind: 'not_found'; readonly userCode: string }
  | { readonly kind: 'malformed' };

export function lookUpDeviceRequest(ctx: ProtocolContext, input: string): DeviceLookup {
  const userCode = normalizeUserCode(input);
  if (userCode === undefined) return { kind: 'malformed' };
  const approval = ctx.store.approvalByUserCode(userCode);
  const open =
    approval !== undefined &&
    approval.status === 'pending' &&
    approval.method === 'device_authorization' &&
    approval.expiresAt > ctx.clock.now();
  const agent = open ? ctx.store.agent(approval.agentId) : undefined;
  if (!open || !agent) return { kind: 'not_found', userCode };
  return {
    kind: 'found',
    request: {
      userCode,
      kind: approval.kind,
      agentName: agent.name,
      hostName: ctx.store.host(approval.hostId)?.name ?? null,
      mode: agent.mode,
      capabilities: approval.capabilities.map((c) => ({
        name: c.name,
        description: ctx.catalog.get(c.name)?.description ?? null,
        constraints: c.constraints ?? null,
        highRisk: ctx.policy.highRisk.has(c.name),
      })),
      reason: approval.reason,
      expiresAt: approval.expiresAt,
    },
  };
}
