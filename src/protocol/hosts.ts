/**
 * Host lifecycle: key rotation (§5.9), revocation with cascade (§5.10, §8.5), and the operator's
 * pre-registration (§2.8), linking (§2.9, §2.10) and unlinking.
 */
import { ProtocolError } from '../errors.js';
import type { HostRecord, StoreWriter } from '../storage/types.js';
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
    await tx.updateHost(host.id, { publicJwk: parsed.jwk, thumbprint: tp, updatedAt: now });
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

/** §2.8 pre-registration: an active host the operator vouches for, optionally linked. */
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
    const now = ctx.clock.now();
    const existing = await tx.hostByThumbprint(tp);
    if (existing) {
      if (existing.status === 'revoked' || existing.status === 'rejected') {
        throw new ProtocolError(
          'invalid_request',
          `A ${existing.status} host already uses this key; a host key cannot be reused.`,
        );
      }
      await tx.updateHost(existing.id, {
        ...(input.name ? { name: input.name } : {}),
        defaultCapabilities: [...input.defaultCapabilities],
        status: 'active',
        activatedAt: existing.activatedAt ?? now,
        preRegistered: true,
        // The operator vouched for it now: no longer only admitted by policy.
        admittedByPolicy: false,
        updatedAt: now,
      });
      const updated = (await tx.host(existing.id)) as HostRecord;
      if (input.userId && updated.userId !== input.userId) {
        await linkHost(ctx, tx, updated, input.userId, now);
      }
      return { host: hostView((await tx.host(existing.id)) as HostRecord), created: false };
    }
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
    return { host: hostView(host), created: true };
  });
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

/** Policy `hosts:` entries are applied at start-up: created if missing, kept in step otherwise. */
export async function applyPolicyHosts(ctx: ProtocolContext): Promise<void> {
  for (const h of ctx.policy.hosts) {
    await preRegisterHost(
      ctx,
      {
        ...(h.name ? { name: h.name } : {}),
        publicJwk: h.publicJwk,
        ...(h.userId ? { userId: h.userId } : {}),
        defaultCapabilities: h.defaultCapabilities,
      },
      'policy',
    );
  }
}
