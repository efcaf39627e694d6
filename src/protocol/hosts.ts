/**
 * Host lifecycle: key rotation (§5.9), revocation with cascade (§5.10, §8.5), and the operator's
 * pre-registration (§2.8), linking (§2.9, §2.10) and unlinking.
 */
import { isDeepStrictEqual } from 'node:util';
import { ProtocolError } from '../errors.js';
import type { Logger } from '../log.js';
import type { HostRecord, Patch, StoreWriter } from '../storage/types.js';
import { announce } from './approvals.js';
import { linkHost } from './host-linking.js';
import { closePendingApprovals, revokeGrants } from './lifecycle.js';
import { verifyKeyPossession, type HostAuth } from './authenticate.js';
import { newId, type AfterCommit, type ProtocolContext } from './context.js';
import { parsePublicJwk, thumbprint, type Ed25519PublicJwk } from './keys.js';
import { hostView } from './views.js';
import { protocolEvent } from './activity.js';

function event(
  tx: StoreWriter,
  at: number,
  type: string,
  host: HostRecord,
  detail: Record<string, unknown> | null,
): Promise<void> {
  return tx.appendActivity(
    protocolEvent({
      at,
      type,
      agentId: null,
      hostId: host.id,
      userId: host.userId,
      capability: null,
      outcome: type.split('.')[1] ?? type,
      detail,
    }),
  );
}

/**
 * §5.9: inline-key hosts only; identity, agents and links stay with the host record.
 *
 * Beyond §5.9, the body must also carry `proof`: a host JWT signed by the new key. §5.9 asks only
 * for a JWT signed by the current key, so any host could take another's public key (published
 * at its JWKS URL, or seen at another server) without holding it: when that key's owner first
 * registered here, it would be taken for the rotated host, and its agents would act as that
 * host's user, who would see what they do (§2.9, §4.5.1). Proof of the new key closes that.
 */
export async function rotateHostKey(
  ctx: ProtocolContext,
  auth: HostAuth,
  body: Readonly<Record<string, unknown>>,
): Promise<Record<string, unknown>> {
  const host = auth.host;
  if (!host) throw new ProtocolError('host_not_found');
  // §8.7: a JWKS-based host rotates by publishing a new key at its URL; the mode is fixed.
  if (host.jwksUrl) {
    throw new ProtocolError(
      'invalid_request',
      'This host uses host_jwks_url: publish the new key there (§8.7).',
    );
  }
  const parsed = parsePublicJwk(body.public_key);
  if (!parsed.ok) throw new ProtocolError(parsed.code, `public_key: ${parsed.message}`);
  const tp = await thumbprint(parsed.jwk);
  await provePossession(ctx, body.proof, parsed.jwk, tp);
  return ctx.write(async (tx) => {
    const now = ctx.clock.now();
    // §5.9 "signed with the current key", read again in the transaction: two rotations signed by
    // one key at once (the owner's and a thief's with a leaked key) must not both succeed, the
    // last one taking the host. Under SERIALIZABLE the second one, re-run, sees the new key.
    const current = await tx.host(host.id);
    if (!current || current.thumbprint !== auth.thumbprint) {
      throw new ProtocolError('invalid_jwt', "The key that signed this request is no longer the host's key.");
    }
    if (current.status === 'revoked') throw new ProtocolError('host_revoked');
    const clash = await tx.hostByThumbprint(tp);
    if (clash && clash.id !== host.id) {
      throw new ProtocolError('invalid_request', 'That key already identifies another host.');
    }
    // Beyond §5.9: a key rotated away may be the leaked one; it never becomes a host key again.
    if (await tx.retiredHostKey(tp)) {
      throw new ProtocolError('invalid_request', 'That key was rotated away before: generate a new key.');
    }
    await tx.updateHost(host.id, { publicJwk: parsed.jwk, thumbprint: tp, updatedAt: now });
    // §5.9 "the old key stops working immediately": remembered, so that a policy `hosts` entry
    // still naming it does not pre-register it again at the next start-up (applyPolicyHostsIn).
    if (tp !== current.thumbprint) {
      await tx.retireHostKey({ thumbprint: current.thumbprint, hostId: host.id, retiredAt: now });
    }
    await event(tx, now, 'host.key_rotated', host, null);
    return { host_id: host.id, status: host.status };
  });
}

async function provePossession(
  ctx: ProtocolContext,
  proof: unknown,
  jwk: Ed25519PublicJwk,
  tp: string,
): Promise<void> {
  if (typeof proof !== 'string' || proof === '') {
    throw new ProtocolError(
      'invalid_request',
      "proof is required: a host JWT signed with the new key (its iss the new key's thumbprint, aud this server), showing that this host holds it.",
    );
  }
  try {
    await verifyKeyPossession(ctx, proof, jwk, tp);
  } catch (err) {
    if (err instanceof ProtocolError && err.code === 'invalid_jwt') {
      throw new ProtocolError('invalid_request', `proof: ${err.message}`);
    }
    throw err;
  }
}

/** §5.10 / §8.5: the host and every agent under it, in one transaction. */
export function revokeHost(
  ctx: ProtocolContext,
  hostId: string,
  by: string,
): Promise<Record<string, unknown>> {
  return ctx.write(async (tx, after) => {
    const host = await tx.host(hostId);
    if (!host) throw new ProtocolError('host_not_found', `No host "${hostId}".`);
    const revoked = await revokeHostIn(ctx, tx, after, host, by);
    return { host_id: hostId, status: 'revoked', agents_revoked: revoked };
  });
}

/** Revokes `host` and cascades to its agents inside `tx` (§8.5); how many agents it revoked. */
export async function revokeHostIn(
  ctx: ProtocolContext,
  tx: StoreWriter,
  after: AfterCommit,
  host: HostRecord,
  by: string,
): Promise<number> {
  const now = ctx.clock.now();
  let revoked = 0;
  for (const agent of await tx.agents({ hostId: host.id })) {
    if (agent.status === 'revoked' || agent.status === 'rejected' || agent.status === 'claimed') continue;
    revoked++;
    await tx.updateAgent(agent.id, { status: 'revoked', updatedAt: now });
    await revokeGrants(tx, agent.id, now, 'Host revoked.');
    for (const id of await closePendingApprovals(tx, agent.id, now, 'host_revoked')) announce(ctx, after, id);
  }
  await tx.updateHost(host.id, { status: 'revoked', updatedAt: now });
  await event(tx, now, 'host.revoked', host, { agents_revoked: revoked, by });
  return revoked;
}

export interface PreRegistration {
  readonly name?: string;
  readonly publicJwk: Ed25519PublicJwk;
  readonly userId?: string;
  readonly defaultCapabilities: readonly string[];
}

/**
 * §2.8 pre-registration through the admin API: an active host the operator vouches for,
 * optionally linked. A key the stored state rules out (preRegistrationRefusal) is refused.
 */
export async function preRegisterHost(
  ctx: ProtocolContext,
  input: PreRegistration,
  by: string,
): Promise<{ host: Record<string, unknown>; created: boolean }> {
  const tp = await thumbprint(input.publicJwk);
  const unknown = input.defaultCapabilities.filter((n) => !ctx.catalog.get(n) || ctx.policy.blocked.has(n));
  if (unknown.length) {
    throw new ProtocolError(
      'invalid_capabilities',
      `Unknown or blocked capabilities: ${unknown.join(', ')}.`,
      {
        fields: { invalid_capabilities: unknown },
      },
    );
  }
  return ctx.write(async (tx) => {
    const applied = await applyPreRegistration(ctx, tx, input, tp, by);
    if ('refusal' in applied) throw new ProtocolError('invalid_request', applied.refusal.reason);
    return { host: hostView(applied.host), created: applied.created };
  });
}

/** Why the stored state rules a pre-registration out, and which host it concerns. */
interface Refusal {
  readonly hostId: string;
  readonly reason: string;
}

type Applied = { readonly host: HostRecord; readonly created: boolean } | { readonly refusal: Refusal };

/** Creates the pre-registered host, or brings the one with this key in step, inside `tx`. */
async function applyPreRegistration(
  ctx: ProtocolContext,
  tx: StoreWriter,
  input: PreRegistration,
  tp: string,
  by: string,
): Promise<Applied> {
  const now = ctx.clock.now();
  const existing = await tx.hostByThumbprint(tp);
  const refusal = await preRegistrationRefusal(tx, tp, existing, input.userId);
  if (refusal) return { refusal };
  if (!existing) return { host: await insertPreRegistered(tx, input, tp, by, now), created: true };
  const patch = preRegistrationPatch(existing, input, now);
  if (patch) await tx.updateHost(existing.id, patch);
  const updated = (await tx.host(existing.id)) as HostRecord;
  if (input.userId && updated.userId !== input.userId) {
    await linkHost(ctx, tx, updated, input.userId, now);
  }
  return { host: (await tx.host(existing.id)) as HostRecord, created: false };
}

/**
 * What a pre-registration of `tp` must not override: a key rotated away (§5.9: "the old key stops
 * working immediately", and it may be the leaked one: vouching for it again would hand whoever
 * holds it an active host), a revoked or rejected host (§2.11: permanent), a host linked to
 * another user (§2.9: one user). Each was decided after the operator wrote the entry.
 */
async function preRegistrationRefusal(
  tx: StoreWriter,
  tp: string,
  existing: HostRecord | undefined,
  userId: string | undefined,
): Promise<Refusal | undefined> {
  // Before `existing`: a host holding a retired key was registered with it after the rotation.
  const retired = await tx.retiredHostKey(tp);
  if (retired) {
    return {
      hostId: retired.hostId,
      reason: `This key was rotated away by host ${retired.hostId} at ${new Date(retired.retiredAt).toISOString()} (§5.9): that host has another key now, and this one cannot be a host key again.`,
    };
  }
  if (!existing) return undefined;
  if (existing.status === 'revoked' || existing.status === 'rejected') {
    return {
      hostId: existing.id,
      reason: `Host ${existing.id}, which has this key, is ${existing.status} (§2.11): a host key cannot be reused.`,
    };
  }
  if (userId && existing.userId !== null && existing.userId !== userId) {
    return {
      hostId: existing.id,
      reason: `Host ${existing.id}, which has this key, is already linked to another user; unlink it first (§2.9).`,
    };
  }
  return undefined;
}

async function insertPreRegistered(
  tx: StoreWriter,
  input: PreRegistration,
  tp: string,
  by: string,
  now: number,
): Promise<HostRecord> {
  const host: HostRecord = {
    id: newId('hst'),
    thumbprint: tp,
    publicJwk: input.publicJwk,
    name: input.name ?? null,
    userId: input.userId ?? null,
    defaultCapabilities: [...input.defaultCapabilities],
    status: 'active',
    preRegistered: true,
    admittedByPolicy: false,
    activatedAt: now,
    lastUsedAt: null,
    createdAt: now,
    updatedAt: now,
  };
  await tx.insertHost(host);
  await event(tx, now, 'host.pre_registered', host, { by });
  return host;
}

/**
 * The changes that bring `existing` in step with the pre-registration; none when it already is,
 * so that a reload re-applying an unchanged policy writes nothing.
 */
function preRegistrationPatch(
  existing: HostRecord,
  input: PreRegistration,
  now: number,
): Patch<HostRecord> | undefined {
  const inStep =
    (!input.name || input.name === existing.name) &&
    isDeepStrictEqual(existing.defaultCapabilities, input.defaultCapabilities) &&
    existing.status === 'active' &&
    existing.preRegistered &&
    !existing.admittedByPolicy;
  if (inStep) return undefined;
  return {
    ...(input.name ? { name: input.name } : {}),
    defaultCapabilities: [...input.defaultCapabilities],
    status: 'active',
    activatedAt: existing.activatedAt ?? now,
    preRegistered: true,
    // The operator vouched for it now: no longer only admitted by policy.
    admittedByPolicy: false,
    updatedAt: now,
  };
}

export function parsePreRegistration(body: Readonly<Record<string, unknown>>): PreRegistration {
  const key = parsePublicJwk(body.public_key);
  if (!key.ok) throw new ProtocolError(key.code, `public_key: ${key.message}`);
  const name = body.name;
  if (name !== undefined && (typeof name !== 'string' || name.length > 200)) {
    throw new ProtocolError('invalid_request', 'name must be a string of at most 200 characters.');
  }
  const userId = body.user_id;
  if (userId !== undefined && (typeof userId !== 'string' || userId === '' || userId.length > 200)) {
    throw new ProtocolError('invalid_request', 'user_id must be a non-empty string.');
  }
  const defaults = body.default_capabilities ?? [];
  if (!Array.isArray(defaults) || defaults.some((d) => typeof d !== 'string')) {
    throw new ProtocolError('invalid_request', 'default_capabilities must be an array of capability names.');
  }
  return {
    ...(name !== undefined ? { name } : {}),
    publicJwk: key.jwk,
    ...(userId !== undefined ? { userId } : {}),
    defaultCapabilities: defaults as string[],
  };
}

/** Operator linking (§2.9 server-side linking), with claiming (§2.10). */
export function linkHostTo(
  ctx: ProtocolContext,
  hostId: string,
  userId: string,
): Promise<Record<string, unknown>> {
  return ctx.write(async (tx) => {
    const host = await tx.host(hostId);
    if (!host) throw new ProtocolError('host_not_found', `No host "${hostId}".`);
    if (host.status === 'revoked' || host.status === 'rejected') {
      throw new ProtocolError(host.status === 'revoked' ? 'host_revoked' : 'host_rejected');
    }
    const claimed = await linkHost(ctx, tx, host, userId, ctx.clock.now());
    return { ...hostView((await tx.host(hostId)) as HostRecord), agents_claimed: claimed };
  });
}

/** §2.9 unlinking: every delegated agent derived its authority from the link and is revoked. */
export function unlinkHost(ctx: ProtocolContext, hostId: string): Promise<Record<string, unknown>> {
  return ctx.write(async (tx) => {
    const now = ctx.clock.now();
    const host = await tx.host(hostId);
    if (!host) throw new ProtocolError('host_not_found', `No host "${hostId}".`);
    if (host.userId === null)
      throw new ProtocolError('invalid_request', `Host ${hostId} is not linked to a user.`);
    let revoked = 0;
    for (const agent of await tx.agents({ hostId })) {
      if (agent.mode !== 'delegated') continue;
      if (agent.status === 'revoked' || agent.status === 'rejected' || agent.status === 'claimed') continue;
      revoked++;
      await tx.updateAgent(agent.id, { status: 'revoked', updatedAt: now });
      await revokeGrants(tx, agent.id, now, 'Host unlinked from its user.');
      // An approval left open would, once approved, link the host to the user again.
      await closePendingApprovals(tx, agent.id, now, 'agent_revoked');
    }
    await tx.updateHost(hostId, { userId: null, updatedAt: now });
    await event(tx, now, 'host.unlinked', host, { agents_revoked: revoked });
    return { ...hostView((await tx.host(hostId)) as HostRecord), agents_revoked: revoked };
  });
}

/** A policy `hosts` entry left as the stored state has it, and why (for the operator's log). */
export interface SkippedPolicyHost {
  /** `hosts[i]`: the entry's key path in the policy file. */
  readonly entry: string;
  readonly hostId: string;
  readonly reason: string;
}

/**
 * The policy's `hosts` (§2.8), at start-up and on every reload, all inside `tx`: created if
 * missing, kept in step otherwise (name, default capabilities, user). An entry the stored state
 * rules out (preRegistrationRefusal: its key rotated away, its host revoked, rejected or linked to
 * another user) is skipped, not applied and not fatal: the host, its user or the operator acted
 * after the file was written, and refusing to start would leave everyone without the proxy.
 */
export async function applyPolicyHostsIn(
  ctx: ProtocolContext,
  tx: StoreWriter,
): Promise<SkippedPolicyHost[]> {
  const skipped: SkippedPolicyHost[] = [];
  for (const [i, h] of ctx.policy.hosts.entries()) {
    const input: PreRegistration = {
      ...(h.name ? { name: h.name } : {}),
      publicJwk: h.publicJwk,
      ...(h.userId ? { userId: h.userId } : {}),
      defaultCapabilities: h.defaultCapabilities,
    };
    const applied = await applyPreRegistration(ctx, tx, input, await thumbprint(h.publicJwk), 'policy');
    if ('refusal' in applied) skipped.push({ entry: `hosts[${i}]`, ...applied.refusal });
  }
  return skipped;
}

/** applyPolicyHostsIn in a transaction of its own (start-up). */
export function applyPolicyHosts(ctx: ProtocolContext): Promise<SkippedPolicyHost[]> {
  return ctx.write((tx) => applyPolicyHostsIn(ctx, tx));
}

/** One warning per skipped entry, naming it: the operator updates or removes it. */
export function logSkippedPolicyHosts(logger: Logger, skipped: readonly SkippedPolicyHost[]): void {
  for (const s of skipped) {
    logger.warn(`policy ${s.entry} not applied: ${s.reason} Update or remove the entry.`, {
      entry: s.entry,
      host_id: s.hostId,
    });
  }
}
