/**
 * Host JWT (§4.5.1) and agent JWT (§4.5) verification against stored state: which key signs,
 * whether the principal may act. Pure JWS and claim checks live in jwt.ts; replay (each jti once)
 * in jti-replay.ts.
 *
 * The signature is verified before any stored status is revealed, so a caller who cannot sign
 * for a principal learns nothing about it (the spec lists the status check first; the outcome
 * for a valid token is the same).
 */
import { ProtocolError } from '../errors.js';
import type { AgentRecord, HostRecord } from '../storage/types.js';
import type { ProtocolContext } from './context.js';
import { decodeJwt, JwtError, verifyJwt, type Claims, type UnverifiedJwt } from './jwt.js';
import { rememberJti } from './jti-replay.js';
import { parsePublicJwk, thumbprint, verificationKey, type Ed25519PublicJwk } from './keys.js';
import { agentKey, jwksHostKey, storedHostKey } from './jwks-auth.js';
import { JwksKeyError } from './jwks/cache.js';
import { applyDueStatus, dueStatus, nearSessionEnd } from './lifecycle.js';

export interface HostAuth {
  /** Absent for an unknown host presenting a self-signed key (only registration and listing accept it). */
  readonly host: HostRecord | undefined;
  readonly thumbprint: string;
  /** The key that signed: the stored one, or for an unknown host the one in `host_public_key`. */
  readonly publicJwk: Ed25519PublicJwk;
  /** The host's JWKS URL when its key comes from one (§4.2): stored with a new host. */
  readonly jwksUrl?: string;
  readonly claims: Claims;
}

export interface AgentAuth {
  readonly agent: AgentRecord;
  readonly host: HostRecord;
  readonly claims: Claims;
  /** Set when the JWT came with a DPoP proof by the key its cnf.jkt names (§4.4; dpop.ts). */
  readonly proof?: 'dpop';
}

export interface HostAuthOptions {
  /** Registration (and capability listing) accept a host the server has never seen (§4.5.1 step 4). */
  readonly allowUnknown?: boolean;
  /**
   * A pending host may register (§2.11) and, as the reference SDK's polling flow needs, read the
   * status of its own agents (§5.3, §7.1); nothing else.
   */
  readonly allowPending?: boolean;
  /** A rejected host may read its agents' status, so its client learns of the denial (§7.1). */
  readonly allowRejected?: boolean;
  /**
   * Asked once a host is known to be new, before its key is fetched or its signature checked;
   * throws to refuse it (the caller's budget for new hosts is used up): a stranger over budget
   * costs no JWKS fetch and no verification.
   */
  readonly admitUnknown?: () => void | Promise<void>;
}

function invalid(message: string): ProtocolError {
  return new ProtocolError('invalid_jwt', message);
}

function decode(token: string, typ: 'host+jwt' | 'agent+jwt'): UnverifiedJwt {
  try {
    return decodeJwt(token, typ);
  } catch (err) {
    if (err instanceof JwtError) throw invalid(err.message);
    throw err;
  }
}

function verify(
  ctx: ProtocolContext,
  jwt: UnverifiedJwt,
  key: Ed25519PublicJwk,
  typ: 'host+jwt' | 'agent+jwt',
  audiences: readonly string[],
): Claims {
  const policy = {
    clockSkewSec: ctx.policy.lifetimes.clockSkewSec,
    maxLifetimeSec: ctx.policy.lifetimes.maxJwtLifetimeSec,
  };
  try {
    return verifyJwt(jwt, verificationKey(key), { typ, audiences, clock: ctx.clock, policy });
  } catch (err) {
    if (err instanceof JwtError) throw invalid(err.message);
    throw err;
  }
}

/*
 * Hot-cache lookups (§10.2): the cache answers at once (null: known to be absent); only a miss
 * reads the store. Callers test the hit themselves (`hit !== undefined ? hit : await load…`), so
 * that a hit costs no promise. What a miss reads is kept unless a write cleared the cache while
 * it was read (HotCache.generation): it could be older than that write.
 */

async function loadHostByThumbprint(
  ctx: ProtocolContext,
  key: string,
  tp: string,
): Promise<HostRecord | null> {
  const generation = ctx.cache.generation;
  const host = (await ctx.store.hostByThumbprint(tp)) ?? null;
  if (ctx.cache.keeps(generation)) ctx.cache.hosts.set(key, host);
  return host;
}

async function loadHost(ctx: ProtocolContext, key: string, id: string): Promise<HostRecord | null> {
  const generation = ctx.cache.generation;
  const host = (await ctx.store.host(id)) ?? null;
  if (ctx.cache.keeps(generation)) ctx.cache.hosts.set(key, host);
  return host;
}

async function loadAgent(ctx: ProtocolContext, id: string): Promise<AgentRecord | null> {
  const generation = ctx.cache.generation;
  const agent = (await ctx.store.agent(id)) ?? null;
  if (ctx.cache.keeps(generation)) ctx.cache.agents.set(id, agent);
  return agent;
}

export function hostStatusError(host: HostRecord): ProtocolError | undefined {
  if (host.status === 'revoked') return new ProtocolError('host_revoked');
  if (host.status === 'rejected') return new ProtocolError('host_rejected');
  if (host.status === 'pending') return new ProtocolError('host_pending');
  return undefined;
}

/**
 * §4.5.1 steps 1–6: the token is well formed, signed by the host's key (the stored one, or for
 * an unknown host the one it presents), addressed to this server, in time, and the host may act.
 * Records nothing: the jti and the host's use are recorded by `acceptHost`, once the caller's
 * limits have passed, so a token that fails here or at a limit leaves no trace.
 */
export async function verifyHostJwt(
  ctx: ProtocolContext,
  token: string,
  options: HostAuthOptions = {},
): Promise<HostAuth> {
  const jwt = decode(token, 'host+jwt');
  const { payload } = jwt;
  const iss = payload.iss;
  if (typeof iss !== 'string' || iss === '') throw invalid('The host JWT needs an iss claim (§4.2).');
  const cacheKey = `tp:${iss}`;
  const hit = ctx.cache.hosts.get(cacheKey);
  let host = (hit !== undefined ? hit : await loadHostByThumbprint(ctx, cacheKey, iss)) ?? undefined;
  let key: Ed25519PublicJwk;
  let jwksUrl: string | undefined;
  let rotated = false;
  if (payload.host_jwks_url !== undefined) {
    // §4.2, §4.5.1: the key is the one `kid` names at the URL (fetched under §8.12, cached).
    const found = await jwksHostKey(ctx, jwt, iss, host, options.allowUnknown === true, options.admitUnknown);
    ({ host, key, rotated } = found);
    jwksUrl = found.url;
  } else if (host?.jwksUrl) {
    key = await storedHostKey(ctx, jwt, { ...host, jwksUrl: host.jwksUrl });
    jwksUrl = host.jwksUrl;
  } else if (host) {
    key = host.publicJwk;
    // A presented key must be the stored one: a kid or an inline key is never trusted on its own.
    if (payload.host_public_key !== undefined) {
      const presented = parsePublicJwk(payload.host_public_key);
      if (!presented.ok || presented.jwk.x !== host.publicJwk.x) {
        throw invalid('host_public_key does not match the key registered for this host.');
      }
    }
  } else {
    if (!options.allowUnknown) throw invalid('Unknown host: no host is registered with this key.');
    await options.admitUnknown?.();
    const presented = parsePublicJwk(payload.host_public_key);
    if (!presented.ok) {
      if (payload.host_public_key === undefined) {
        throw invalid('An unknown host must present host_public_key (§4.2).');
      }
      throw new ProtocolError(presented.code, `host_public_key: ${presented.message}`);
    }
    key = presented.jwk;
    // §4.2: iss MUST be the RFC 7638 thumbprint of the signing key.
    if ((await thumbprint(key)) !== iss) {
      throw invalid('iss is not the JWK thumbprint (RFC 7638, SHA-256) of host_public_key.');
    }
  }
  const claims = verify(ctx, jwt, key, 'host+jwt', [ctx.issuer()]);
  if (host) {
    const statusError = hostStatusError(host);
    const tolerated =
      (host.status === 'pending' && options.allowPending) ||
      (host.status === 'rejected' && options.allowRejected);
    if (statusError && !tolerated) throw statusError;
    if (rotated) host = await recordRotation(ctx, host, iss, key);
  }
  return { host, thumbprint: iss, publicJwk: key, ...(jwksUrl !== undefined ? { jwksUrl } : {}), claims };
}

/**
 * That whoever asks holds `key` (§5.9 rotation, see hosts.ts): `token` is a host JWT signed by it,
 * verified as every host JWT is (typ, signature, aud this server, lifetime), its `iss` the key's
 * thumbprint, its `jti` used up.
 */
export async function verifyKeyPossession(
  ctx: ProtocolContext,
  token: string,
  key: Ed25519PublicJwk,
  keyThumbprint: string,
): Promise<void> {
  const jwt = decode(token, 'host+jwt');
  if (jwt.payload.iss !== keyThumbprint) {
    throw invalid('Its iss is not the thumbprint (RFC 7638) of the new key.');
  }
  const claims = verify(ctx, jwt, key, 'host+jwt', [ctx.issuer()]);
  await rememberJti(ctx, `host:${keyThumbprint}`, claims);
}

/**
 * §4.5.1 step 4, §8.7: a JWKS-based host signed with a new key of its set; its stored identifier
 * follows, so its agents' JWTs with the new `iss` resolve by it from now on.
 */
async function recordRotation(
  ctx: ProtocolContext,
  host: HostRecord,
  iss: string,
  key: Ed25519PublicJwk,
): Promise<HostRecord> {
  const now = ctx.clock.now();
  await ctx.write((tx) => tx.updateHost(host.id, { thumbprint: iss, publicJwk: key, updatedAt: now }));
  ctx.logger.info('host key rotated via its JWKS URL', { host_id: host.id });
  return { ...host, thumbprint: iss, publicJwk: key, updatedAt: now };
}

/**
 * §4.6: the host's jti is used up (a replay throws) and its use recorded (§2.4). §8.4 partitions
 * the replay cache by host identity: a known host's jtis by its id, so that a key rotation (§5.9,
 * §8.7) starts no fresh partition, and every host's also by its key's thumbprint, so that a new
 * host's registration token stays used up once the host it created is known by that key.
 */
export function acceptHost(ctx: ProtocolContext, auth: HostAuth): void | Promise<void> {
  const { host } = auth;
  const record = (): void => {
    if (host) ctx.usage.recordHost(host.id, ctx.clock.now());
  };
  const byId = (): void | Promise<void> =>
    host ? rememberJti(ctx, `host-id:${host.id}`, auth.claims) : undefined;
  const byKey = rememberJti(ctx, `host:${auth.thumbprint}`, auth.claims);
  const remembered = byKey instanceof Promise ? byKey.then(byId) : byId();
  if (remembered instanceof Promise) return remembered.then(record);
  record();
}

export function agentStatusError(agent: AgentRecord): ProtocolError | undefined {
  switch (agent.status) {
    case 'active':
      return undefined;
    case 'revoked':
      return new ProtocolError('agent_revoked');
    case 'expired':
      return new ProtocolError('agent_expired');
    case 'pending':
      return new ProtocolError('agent_pending');
    case 'rejected':
      return new ProtocolError('agent_rejected');
    case 'claimed':
      return new ProtocolError('agent_claimed');
  }
}

/**
 * §4.5 steps 1–7 (everything but replay): `audiences` is the issuer for protocol endpoints, the
 * execute location for execution (§4.3). Records nothing (see `acceptAgent`), except that an
 * agent whose lifetime has run out is stored as expired on the way (lifecycle.ts).
 */
export function verifyAgentJwt(
  ctx: ProtocolContext,
  token: string,
  audiences: readonly string[],
): AgentAuth | Promise<AgentAuth> {
  const jwt = decode(token, 'agent+jwt');
  const { payload } = jwt;
  const sub = payload.sub;
  if (typeof sub !== 'string' || sub === '') throw invalid('The agent JWT needs a sub claim (§4.3).');
  const iss = payload.iss;
  if (iss !== undefined && typeof iss !== 'string') throw invalid('iss must be a string.');
  // Execution's usual case: agent and host in the hot cache, the agent's own key. Everything is
  // then synchronous, so the request goes on without a trip through the microtask queue.
  const agentHit = ctx.cache.agents.get(sub);
  const hostHit = agentHit ? ctx.cache.hosts.get(`id:${agentHit.hostId}`) : undefined;
  if (agentHit && hostHit && !agentHit.jwksUrl) {
    return acceptedAgent(ctx, jwt, agentHit, hostHit, agentHit.publicJwk, audiences);
  }
  return (async () => {
    const stored = agentHit !== undefined ? agentHit : await loadAgent(ctx, sub);
    // Unknown agent and foreign host get the same answer: nothing about other hosts leaks.
    if (!stored) throw invalid('Unknown agent.');
    const hostKey = `id:${stored.hostId}`;
    const cachedHost = ctx.cache.hosts.get(hostKey);
    const host = cachedHost !== undefined ? cachedHost : await loadHost(ctx, hostKey, stored.hostId);
    if (!host) throw invalid('Unknown agent.');
    return acceptedAgent(ctx, jwt, stored, host, await agentKey(ctx, jwt, stored), audiences);
  })();
}

/** §4.5 steps 3–7 once the agent, its host and the key are known. */
function acceptedAgent(
  ctx: ProtocolContext,
  jwt: UnverifiedJwt,
  stored: AgentRecord,
  host: HostRecord,
  key: Ed25519PublicJwk,
  audiences: readonly string[],
): AgentAuth | Promise<AgentAuth> {
  const claims = verify(ctx, jwt, key, 'agent+jwt', audiences);
  const iss = jwt.payload.iss;
  // The reference SDK omits iss; when present it MUST name the agent's own host (§4.5 steps 4–5).
  // Checked after the signature, so a forger cannot probe which host owns an agent.
  if (typeof iss !== 'string' || iss === host.thumbprint) return agentMayAct(ctx, stored, host, claims);
  if (!host.jwksUrl) throw invalid(FOREIGN_ISS);
  // A JWKS-based host's iss changes when it rotates, possibly before its next host JWT updates the
  // stored one (§8.7 race): then iss must be the thumbprint of a key in the host's set (§4.5 step 4).
  return issInHostJwks(ctx, host.jwksUrl, iss).then(() => agentMayAct(ctx, stored, host, claims));
}

const FOREIGN_ISS = 'iss does not identify the host this agent is registered under.';

/** §4.5 step 4's fallback: `iss` is the thumbprint of a key the host's JWKS URL serves now. */
async function issInHostJwks(ctx: ProtocolContext, url: string, iss: string): Promise<void> {
  let found = false;
  try {
    found = (await ctx.jwks?.hasThumbprint(url, iss)) === true;
  } catch (err) {
    if (!(err instanceof JwksKeyError)) throw err;
  }
  if (!found) throw invalid(FOREIGN_ISS);
}

/** §4.5 steps 5–6 and §4.3's capabilities claim, once the agent's JWT is verified. */
function agentMayAct(
  ctx: ProtocolContext,
  stored: AgentRecord,
  host: HostRecord,
  claims: Claims,
): AgentAuth | Promise<AgentAuth> {
  // §4.3: string[]. A malformed claim must not read as "absent", which would mean every grant.
  const narrowed = claims.capabilities;
  if (narrowed !== undefined && !(Array.isArray(narrowed) && narrowed.every((c) => typeof c === 'string'))) {
    throw invalid('The capabilities claim must be an array of strings (§4.3).');
  }
  const hostError = hostStatusError(host);
  if (hostError) throw hostError;
  // A lifetime clock that ran out is stored on the way; otherwise nothing is awaited here.
  const due = dueStatus(ctx, stored);
  if (due === undefined) return activeAgent(stored, host, claims);
  return applyDueStatus(ctx, stored, due).then((agent) => activeAgent(agent, host, claims));
}

function activeAgent(agent: AgentRecord, host: HostRecord, claims: Claims): AgentAuth {
  const agentError = agentStatusError(agent);
  if (agentError) throw agentError;
  return { agent, host, claims };
}

/**
 * §4.5 step 8 / §4.6: the agent's jti is used up (a replay throws) and its use recorded (§2.4).
 * Synchronous unless the ledger is shared (PostgreSQL): one round trip then.
 */
export function acceptAgent(ctx: ProtocolContext, auth: AgentAuth): void | Promise<void> {
  const record = (): void | Promise<void> => {
    const now = ctx.clock.now();
    const { agent, host } = auth;
    // Near the session's end, the use is written at once, so other replicas hear of it (§2.4).
    if (nearSessionEnd(ctx, agent, now)) return ctx.usage.recordAgentNow(agent.id, host.id, now);
    ctx.usage.recordAgent(agent.id, host.id, now);
  };
  const remembered = rememberJti(ctx, `agent:${auth.agent.id}`, auth.claims);
  if (remembered instanceof Promise) return remembered.then(record);
  return record();
}
