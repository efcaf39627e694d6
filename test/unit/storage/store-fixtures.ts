/**
 * Records for the storage contract suite: each builder fills every field with a plausible value,
 * optional ones included, so that a round trip compares every column; a test overrides the fields
 * it is about.
 */
import type {
  ActivityRecord,
  AgentRecord,
  ApprovalRecord,
  AsyncJobRecord,
  GrantRecord,
  HostRecord,
  PasskeyRecord,
  PerCallRecord,
  SessionRecord,
} from '../../../src/storage/types.js';

export const NOW = 1_800_000_000_000;
const JWK = { kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo' } as const;

export const host = (id: string, over: Partial<HostRecord> = {}): HostRecord => ({
  id,
  thumbprint: `tp-${id}`,
  publicJwk: JWK,
  name: `host ${id}`,
  userId: 'alice',
  defaultCapabilities: ['list_pets', 'get_pet'],
  status: 'active',
  preRegistered: false,
  admittedByPolicy: false,
  registeredIp: '192.0.2.7',
  registeredUserAgent: 'ShelterBot/2.1',
  jwksUrl: null,
  activatedAt: NOW,
  lastUsedAt: null,
  createdAt: NOW,
  updatedAt: NOW,
  ...over,
});

export const agent = (id: string, hostId: string, over: Partial<AgentRecord> = {}): AgentRecord => ({
  id,
  hostId,
  userId: 'alice',
  name: `agent ${id}`,
  publicJwk: JWK,
  keyThumbprint: `tp-${id}`,
  jwksUrl: null,
  jwksKid: null,
  mode: 'delegated',
  status: 'active',
  lastUsedAt: null,
  activatedAt: NOW,
  createdAt: NOW,
  updatedAt: NOW,
  ...over,
});

export const grant = (id: string, agentId: string, over: Partial<GrantRecord> = {}): GrantRecord => ({
  id,
  agentId,
  capability: `cap-${id}`,
  status: 'active',
  constraints: { limit: { max: 200 }, species: { in: ['cat', 'dog'] } },
  proposedConstraints: { limit: { max: 1000 } },
  approvedConstraints: { limit: { max: 200 } },
  grantedBy: 'alice',
  deniedBy: null,
  reason: 'for the shelter report',
  expiresAt: NOW + 3_600_000,
  approvalId: null,
  capabilityVersion: 'v1',
  createdAt: NOW,
  updatedAt: NOW,
  ...over,
});

export const approval = (
  id: string,
  agentId: string,
  hostId: string,
  over: Partial<ApprovalRecord> = {},
): ApprovalRecord => ({
  id,
  kind: 'capability_request',
  agentId,
  hostId,
  userCode: `code-${id}`,
  method: 'device_authorization',
  loginHint: 'alice',
  bindingMessage: 'shelter report',
  reason: 'needs pets',
  capabilities: [{ name: 'list_pets', constraints: { limit: { max: 5 } }, proposed: { limit: { max: 9 } } }],
  status: 'pending',
  createdAt: NOW,
  expiresAt: NOW + 60_000,
  decidedAt: null,
  decidedBy: null,
  ...over,
});

export const activity = (over: Partial<ActivityRecord> = {}): ActivityRecord => ({
  at: NOW,
  type: 'execute',
  agentId: 'a1',
  hostId: 'h1',
  userId: 'alice',
  capability: 'list_pets',
  outcome: 'success',
  detail: { status: 200, args: ['x', 1, true, null] },
  jti: 'jti-1',
  latencyMs: 12.5,
  upstreamStatus: 200,
  ...over,
});

export const asyncJob = (
  id: string,
  agentId: string,
  over: Partial<AsyncJobRecord> = {},
): AsyncJobRecord => ({
  id,
  agentId,
  capability: 'export_pets',
  upstreamUrl: `https://upstream.example.com/jobs/${id}`,
  statusCapability: 'get_export',
  createdAt: NOW,
  expiresAt: NOW + 60_000,
  ...over,
});

export const session = (idHash: string, over: Partial<SessionRecord> = {}): SessionRecord => ({
  idHash,
  userId: 'alice',
  authMethod: 'oidc',
  authenticatedAt: NOW,
  acr: 'urn:example:mfa',
  amr: ['pwd', 'otp'],
  credentialTag: null,
  csrfToken: `csrf-${idHash}`,
  createdAt: NOW,
  expiresAt: NOW + 3_600_000,
  ...over,
});

export const passkey = (id: string, over: Partial<PasskeyRecord> = {}): PasskeyRecord => ({
  id,
  userId: 'alice',
  userHandle: `handle-${id}`,
  publicKey: new Uint8Array([0xa5, 0x01, 0x02, 0x03, 0x26, 0x00, 0xff]),
  counter: 0,
  transports: ['internal', 'hybrid'],
  name: `key ${id}`,
  createdAt: NOW,
  lastUsedAt: null,
  ...over,
});

export const perCall = (id: string, agentId: string, over: Partial<PerCallRecord> = {}): PerCallRecord => ({
  id,
  agentId,
  hostId: 'h1',
  userId: 'alice',
  capability: 'delete_pet',
  arguments: { petId: 7, reason: 'adopted', tags: ['a', 'b'] },
  status: 'pending',
  result: null,
  error: null,
  createdAt: NOW,
  expiresAt: NOW + 60_000,
  decidedAt: null,
  decidedBy: null,
  keepUntil: NOW + 120_000,
  ...over,
});
