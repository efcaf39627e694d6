/**
 * The query-plan test's drive table: a few rows in every table, then one realistic call of each
 * public method of Store and of StoreWriter, so that every statement the store prepares is seen.
 */
import type { PgShared } from '../../../src/storage/pg-shared.js';
import type {
  ActivityRecord,
  AgentRecord,
  ApprovalRecord,
  GrantRecord,
  HostRecord,
  PasskeyRecord,
  PerCallRecord,
  Store,
  StoreWriter,
} from '../../../src/storage/types.js';

const NOW = 1_800_000_000_000;
const JWK = { kty: 'OKP', crv: 'Ed25519', x: 'x' } as const;

const host = (id: string): HostRecord => ({
  id,
  thumbprint: `tp-${id}`,
  publicJwk: JWK,
  name: id,
  userId: 'alice',
  defaultCapabilities: [],
  status: 'active',
  preRegistered: false,
  admittedByPolicy: false,
  activatedAt: NOW,
  lastUsedAt: null,
  createdAt: NOW,
  updatedAt: NOW,
});

const agent = (id: string, hostId: string): AgentRecord => ({
  id,
  hostId,
  userId: 'alice',
  name: id,
  publicJwk: JWK,
  keyThumbprint: `tp-${id}`,
  mode: 'delegated',
  status: 'active',
  lastUsedAt: null,
  activatedAt: NOW,
  createdAt: NOW,
  updatedAt: NOW,
});

const grant = (id: string, agentId: string, approvalId: string | null): GrantRecord => ({
  id,
  agentId,
  capability: `cap-${id}`,
  status: 'pending',
  constraints: null,
  grantedBy: null,
  deniedBy: null,
  reason: null,
  expiresAt: null,
  approvalId,
  createdAt: NOW,
  updatedAt: NOW,
});

const approval = (id: string, agentId: string, hostId: string): ApprovalRecord => ({
  id,
  kind: 'capability_request',
  agentId,
  hostId,
  userCode: `code-${id}`,
  method: 'device_authorization',
  loginHint: 'alice',
  bindingMessage: null,
  reason: null,
  capabilities: [{ name: 'cap' }],
  status: 'pending',
  createdAt: NOW,
  expiresAt: NOW + 60_000,
  decidedAt: null,
  decidedBy: null,
});

const activity = (agentId: string): ActivityRecord => ({
  at: NOW,
  type: 'execute',
  agentId,
  hostId: 'h1',
  userId: 'alice',
  capability: 'cap',
  outcome: 'success',
  detail: null,
  jti: 'j',
  latencyMs: 1,
  upstreamStatus: 200,
});

const perCall = (id: string): PerCallRecord => ({
  id,
  agentId: 'a1',
  hostId: 'h1',
  userId: 'alice',
  capability: 'cap',
  arguments: {},
  status: 'pending',
  result: null,
  error: null,
  createdAt: NOW,
  expiresAt: NOW + 60_000,
  decidedAt: null,
  decidedBy: null,
  keepUntil: NOW + 120_000,
});

const passkey = (id: string, userId: string): PasskeyRecord => ({
  id,
  userId,
  userHandle: `h-${id}`,
  publicKey: new Uint8Array([1]),
  counter: 0,
  transports: ['usb'],
  name: 'key',
  createdAt: NOW,
  lastUsedAt: null,
});

/** A few rows in every table. */
export async function seed(store: Store): Promise<void> {
  await store.write(async (tx) => {
    for (const h of ['h1', 'h2']) await tx.insertHost(host(h));
    for (const a of ['a1', 'a2']) await tx.insertAgent(agent(a, 'h1'));
    for (const p of ['p1', 'p2']) await tx.insertApproval(approval(p, 'a1', 'h1'));
    await tx.putGrant(grant('g1', 'a1', 'p1'));
    await tx.appendActivity(activity('a1'));
    await tx.insertPerCall(perCall('c1'));
    await tx.insertPasskey(passkey('k1', 'alice'));
  });
  await store.insertAsyncJob({
    id: 'j1',
    agentId: 'a1',
    capability: 'cap',
    upstreamUrl: 'https://u/1',
    statusCapability: null,
    createdAt: NOW,
    expiresAt: NOW + 1,
  });
  await store.insertSession({
    idHash: 's1',
    userId: 'alice',
    authMethod: 'password',
    authenticatedAt: NOW,
    csrfToken: 'c',
    createdAt: NOW,
    expiresAt: NOW + 1,
  });
  await store.markOpened('p1', 'alice', NOW);
}

/** One call, or a list of calls (one per filter combination); each returns a promise. */
type Call<S> = (s: S) => Promise<unknown> | Promise<unknown>[];

/** Makes every call of `calls` against `s`, one after another, each settled before the next. */
export async function callAll<S>(calls: Record<string, Call<S>>, s: S): Promise<void> {
  for (const call of Object.values(calls)) await Promise.all([call(s)].flat());
}

/** Every reader method, with each filter combination the callers use. */
const READER_CALLS: Record<string, Call<StoreWriter | Store>> = {
  host: (s) => s.host('h1'),
  hostByThumbprint: (s) => s.hostByThumbprint('tp-h1'),
  hostByJwksUrl: (s) => s.hostByJwksUrl('https://keys.example.com/jwks.json'),
  retiredHostKey: (s) => s.retiredHostKey('tp-old'),
  appliedPolicyGrants: (s) => s.appliedPolicyGrants(),
  hosts: (s) => [
    s.hosts({ limit: 100 }),
    s.hosts({ after: { createdAt: NOW, id: 'h1' }, limit: 100 }),
    s.hosts({ status: 'active', after: { createdAt: NOW, id: 'h1' }, limit: 100 }),
    s.hosts({ userId: 'alice' }),
    s.hosts({ status: 'active', userId: 'alice', limit: 100 }),
  ],
  agent: (s) => s.agent('a1'),
  agentByKey: (s) => s.agentByKey('h1', 'tp-a1'),
  agents: (s) => [
    s.agents({ hostId: 'h1' }),
    s.agents({ status: 'active', limit: 100 }),
    s.agents({ userId: 'alice' }),
    s.agents({ hostId: 'h1', userId: 'alice' }),
    s.agents({ limit: 100 }),
    s.agents({ after: { createdAt: NOW, id: 'a1' }, limit: 100 }),
    s.agents({ status: 'active', after: { createdAt: NOW, id: 'a1' }, limit: 100 }),
    s.agents({ hostId: 'h1', after: { createdAt: NOW, id: 'a1' }, limit: 100 }),
    s.agents({ userId: 'alice', after: { createdAt: NOW, id: 'a1' }, limit: 100 }),
  ],
  grants: (s) => s.grants('a1'),
  grantsOffVersion: (s) => s.grantsOffVersion('list_pets', 'v1'),
  grantedCapabilities: (s) => s.grantedCapabilities(['list_pets', 'get_pet']),
  approval: (s) => s.approval('p1'),
  approvalByUserCode: (s) => s.approvalByUserCode('code-p1'),
  approvals: (s) => [
    s.approvals({ status: 'pending', limit: 100 }),
    s.approvals({ limit: 100 }),
    s.approvals({ agentId: 'a1' }),
    s.approvals({ status: 'pending', agentId: 'a1' }),
    s.approvals({ status: 'pending', after: { createdAt: NOW, id: 'p1' }, limit: 100 }),
    s.approvals({ status: 'pending', agentId: 'a1', after: { createdAt: NOW, id: 'p1' }, limit: 100 }),
  ],
  overdueApprovals: (s) => s.overdueApprovals(NOW, 100),
  countHosts: (s) => s.countHosts('pending'),
  countPolicyAdmittedHosts: (s) => s.countPolicyAdmittedHosts(),
  countOpenApprovals: (s) => s.countOpenApprovals('h1', NOW),
  countPendingApprovals: (s) => s.countPendingApprovals(NOW),
  activity: (s) => [
    s.activity({ limit: 50 }),
    s.activity({ agentId: 'a1', limit: 50 }),
    s.activity({ agentId: 'a1', beforeId: 10, limit: 50 }),
    s.activity({ hostId: 'h1', limit: 50 }),
    s.activity({ capability: 'cap', since: NOW - 1, until: NOW + 1, limit: 50 }),
    s.activity({ since: NOW - 1, limit: 50 }),
    s.activity({ since: NOW - 1, until: NOW + 1, limit: 50 }),
    s.activity({ until: NOW + 1, beforeId: 10, limit: 50 }),
    s.activity({ since: NOW - 1, beforeId: 10, limit: 50 }),
  ],
  asyncJob: (s) => s.asyncJob('j1'),
  agentsOfUser: (s) => s.agentsOfUser('alice', { limit: 20, offset: 0 }),
  countAgentsOfUser: (s) => s.countAgentsOfUser('alice'),
  perCall: (s) => s.perCall('c1'),
  perCallsAddressedTo: (s) => [s.perCallsAddressedTo('alice', NOW, 20), s.perCallsAddressedTo(null, NOW, 20)],
  perCalls: (s) => [
    s.perCalls({ limit: 20 }),
    s.perCalls({ status: 'pending', before: { createdAt: NOW, id: 'c9' }, limit: 20 }),
  ],
  countOpenPerCalls: (s) => s.countOpenPerCalls('a1', NOW),
  pendingPerCallsOf: (s) => s.pendingPerCallsOf('a1', 100),
  overduePerCalls: (s) => s.overduePerCalls(NOW, 100),
  abandonedPerCalls: (s) => s.abandonedPerCalls(NOW, 100),
  passkey: (s) => s.passkey('k1'),
  passkeys: (s) => s.passkeys('alice'),
  hasEnrolmentCode: (s) => s.hasEnrolmentCode('alice', 'hash', NOW),
};

export const STORE_CALLS: Record<string, Call<Store>> = {
  ...READER_CALLS,
  write: (s) => s.write((tx) => tx.host('h1')),
  touch: (s) =>
    s.touch(new Map([['a1', NOW]]), new Map([['h1', NOW]]), new Map([['g1', { uses: 1, lastUsedAt: NOW }]])),
  grantUses: (s) => s.grantUses('a1'),
  appendActivities: (s) => s.appendActivities([activity('a2')]),
  insertAsyncJob: (s) =>
    s.insertAsyncJob({
      id: 'j2',
      agentId: 'a1',
      capability: 'cap',
      upstreamUrl: 'https://u/2',
      statusCapability: 'status',
      createdAt: NOW,
      expiresAt: NOW + 1,
    }),
  forgetOlderAsyncJobs: (s) => s.forgetOlderAsyncJobs('a1', 1000),
  deleteExpiredAsyncJobs: (s) => s.deleteExpiredAsyncJobs(NOW, 500),
  deleteActivityBefore: (s) => s.deleteActivityBefore(NOW - 1, 1000),
  deleteClosedApprovalsBefore: (s) => s.deleteClosedApprovalsBefore(NOW - 1, 1000),
  insertSession: (s) =>
    s.insertSession({
      idHash: 's2',
      userId: 'bob',
      authMethod: 'oidc',
      authenticatedAt: NOW,
      acr: null,
      amr: ['pwd'],
      csrfToken: 'c',
      createdAt: NOW,
      expiresAt: NOW + 1,
    }),
  session: (s) => s.session('s1'),
  deleteSession: (s) => s.deleteSession('s2'),
  deleteExpiredSessions: (s) => s.deleteExpiredSessions(NOW, 500),
  markOpened: (s) => s.markOpened('p2', 'alice', NOW),
  inbox: (s) => [
    s.inbox({ userId: 'alice', now: NOW, limit: 20 }),
    s.inbox({ userId: 'alice', now: NOW, before: { createdAt: NOW, id: 'p9' }, limit: 20 }),
  ],
  recordPasskeyUse: (s) => s.recordPasskeyUse('k1', 1, NOW),
  deleteStalePerCalls: (s) => s.deleteStalePerCalls(NOW, 100),
  deleteStalePending: (s) => s.deleteStalePending(NOW - 1, 100, NOW),
  // Each call's statements: an issue with room and one at its bound (the eviction, the refusal).
  insertOidcPending: (s) => {
    const pending = (n: number) => ({
      stateHash: `st${n}`,
      nonce: 'n',
      verifier: 'v',
      returnTo: '/device',
      fresh: false,
      browserHash: 'b',
      expiresAt: NOW + 600_000,
    });
    return s.insertOidcPending(pending(1), 10, NOW).then(() => s.insertOidcPending(pending(2), 1, NOW));
  },
  takeOidcPending: (s) => s.takeOidcPending('st2', 'b', NOW),
  issueChallenge: (s) => {
    const challenge = (n: number) => ({
      challengeHash: `ch${n}`,
      owner: 'ip:1',
      data: '{}',
      expiresAt: NOW + 1,
    });
    return s
      .issueChallenge(challenge(1), { perOwner: 5, total: 10 }, NOW)
      .then(() => s.issueChallenge(challenge(2), { perOwner: 1, total: 1 }, NOW));
  },
  takeChallenge: (s) => s.takeChallenge('ch1', NOW),
  useTotpStep: (s) => s.useTotpStep('alice', 60_000_000, NOW + 60_000),
  deleteExpiredSignInState: (s) => s.deleteExpiredSignInState(NOW + 600_000, 500),
  ping: (s) => s.ping(),
  close: () => Promise.resolve(), // closing is afterAll's; it prepares nothing
};

/** Every writer method; the reader ones again through the transaction's view. */
export const WRITER_CALLS: Record<string, Call<StoreWriter>> = {
  ...READER_CALLS,
  insertHost: (tx) => tx.insertHost(host('h3')),
  updateHost: (tx) => tx.updateHost('h3', { name: 'renamed', updatedAt: NOW }),
  deleteHost: (tx) => tx.deleteHost('h3'),
  retireHostKey: (tx) => tx.retireHostKey({ thumbprint: 'tp-old', hostId: 'h1', retiredAt: NOW }),
  putAppliedPolicyGrants: (tx) => tx.putAppliedPolicyGrants('{"defaults":[]}'),
  insertAgent: (tx) => tx.insertAgent(agent('a3', 'h2')),
  updateAgent: (tx) => tx.updateAgent('a3', { status: 'revoked', updatedAt: NOW }),
  deleteAgent: (tx) => tx.deleteAgent('a3'),
  putGrant: (tx) => tx.putGrant(grant('g2', 'a1', null)),
  insertGrant: (tx) => tx.insertGrant(grant('g5', 'a2', null)),
  updateGrant: (tx) => tx.updateGrant('g2', { status: 'active', updatedAt: NOW }),
  insertApproval: (tx) => tx.insertApproval(approval('p3', 'a2', 'h1')),
  updateApproval: (tx) => tx.updateApproval('p3', { status: 'denied', decidedAt: NOW }),
  deleteApproval: (tx) => tx.deleteApproval('p3'),
  appendActivity: (tx) => tx.appendActivity(activity('a2')),
  deleteAgentActivity: (tx) => tx.deleteAgentActivity('a2', 1000),
  insertPerCall: (tx) => tx.insertPerCall(perCall('c2')),
  updatePerCall: (tx) => tx.updatePerCall('c2', 'pending', { status: 'executing', decidedAt: NOW }),
  deletePerCall: (tx) => tx.deletePerCall('c2'),
  insertPasskey: (tx) => tx.insertPasskey(passkey('k2', 'bob')),
  deletePasskey: (tx) => tx.deletePasskey('k2', 'bob'),
  deleteSessionsOf: (tx) => tx.deleteSessionsOf('bob'),
  putEnrolmentCode: (tx) => tx.putEnrolmentCode('bob', 'hash', NOW + 1),
  takeEnrolmentCode: (tx) => tx.takeEnrolmentCode('bob', 'hash', NOW),
};

/** What replicas share on PostgreSQL beyond the Store contract (pg-shared.ts); one call per statement. */
export const SHARED_CALLS: Record<string, Call<PgShared>> = {
  recordJti: (s) => [
    // First sighting (the INSERT), then the replay (the conflict, and the UPDATE of its expiry).
    s
      .recordJti({ identity: 'agent:a1', jti: 'j1', expiresAt: NOW + 90_000 })
      .then(() => s.recordJti({ identity: 'agent:a1', jti: 'j1', expiresAt: NOW + 95_000 })),
  ],
  deleteExpiredJtis: (s) => s.deleteExpiredJtis(NOW, 500),
  giveRate: (s) => s.giveRate(NOW, { key: 'signin:user:alice', limit: { count: 5, windowMs: 900_000 } }),
  // One statement per number of buckets a limit step takes (1 to 4).
  takeRates: (s) => [
    s.takeRates(NOW, [{ key: 'ip:192.0.2.1', limit: { count: 60, windowMs: 60_000 } }]),
    s.takeRates(NOW, [
      { key: 'agent:a1', limit: { count: 60, windowMs: 60_000 } },
      { key: 'host:h1', limit: { count: 60, windowMs: 60_000 } },
    ]),
    s.takeRates(NOW, [
      { key: 'agent:a1', limit: { count: 60, windowMs: 60_000 } },
      { key: 'host:h1', limit: { count: 60, windowMs: 60_000 } },
      { key: 'user:alice', limit: { count: 60, windowMs: 30_000 } },
    ]),
    s.takeRates(NOW, [
      { key: 'cap:x:agent:a1', limit: { count: 6, windowMs: 60_000 } },
      { key: 'cap:x:host:h1', limit: { count: 60, windowMs: 60_000 } },
      { key: 'cap:x:user:alice', limit: { count: 60, windowMs: 60_000 } },
      { key: 'cap:x', limit: { count: 600, windowMs: 60_000 } },
    ]),
  ],
  rateBucket: (s) => s.rateBucket('agent:a1'),
  deleteFullRateBuckets: (s) => s.deleteFullRateBuckets(NOW, 500),
};
