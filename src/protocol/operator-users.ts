/**
 * What the operator does for one person (operator API and CLI): their passkeys, the code for a
 * first passkey, and their sessions.
 *
 * A lost passkey: on the account page, changing a set of passkeys takes a confirmation with one of
 * them (passkey-account.ts), so somebody whose only passkey is gone can neither remove it nor add
 * another; and where policy asks for proof of presence (§8.11) they cannot approve anything either.
 * The operator removes it instead. Afterwards the person's next passkey is a first one again: a
 * fresh sign-in enrols it (passkeys.ts `enrolmentNeeds`), with the operator's one-time code where
 * sign_in.first_passkey is operator_code (issued here too). A lost passkey may be in someone else's
 * hands and may have signed them in, so every session of the person ends in the same transaction.
 *
 * A stolen laptop, or someone who left (an OIDC account disabled at the provider still has its
 * sessions here until they expire): the operator signs the person out everywhere.
 *
 * A deleted account (taken out of sign_in.local.users, or deleted at the OIDC provider): §2.6, every
 * host linked to the person is revoked with its agents (§8.5), and their passkeys and sessions go.
 *
 * Each action is an activity record (§11) that names the operator's origin.
 */
import { ProtocolError } from '../errors.js';
import type { PasskeyRecord } from '../storage/types.js';
import type { ProtocolContext } from './context.js';
import { userEvent } from './activity.js';
import { originDetail, type DecisionOrigin } from './decision-record.js';
import { enrolmentCodeHash, newEnrolmentCode } from './enrolment-codes.js';
import { revokeHostIn } from './hosts.js';

export interface PasskeyRemoval {
  /** Only this passkey; without it, every passkey of the user. */
  readonly passkeyId?: string;
  readonly reason?: string;
  readonly origin?: DecisionOrigin;
}

export interface RemovedPasskeys {
  readonly removed: readonly PasskeyRecord[];
  readonly sessionsEnded: number;
}

/** Removes `userId`'s passkeys (or one of them) and ends their sessions, all or nothing. */
export function removeUserPasskeys(
  ctx: ProtocolContext,
  userId: string,
  removal: PasskeyRemoval,
): Promise<RemovedPasskeys> {
  const now = ctx.clock.now();
  return ctx.store.write(async (tx) => {
    const held = await tx.passkeys(userId);
    const targets = removal.passkeyId === undefined ? held : held.filter((p) => p.id === removal.passkeyId);
    if (targets.length === 0) {
      throw new ProtocolError(
        'passkey_not_found',
        removal.passkeyId === undefined
          ? `User "${userId}" has no passkeys.`
          : `User "${userId}" has no passkey "${removal.passkeyId}".`,
      );
    }
    for (const p of targets) await tx.deletePasskey(p.id, userId);
    const sessionsEnded = await tx.deleteSessionsOf(userId);
    for (const p of targets) {
      await tx.appendActivity(
        userEvent('user.passkey_removed', userId, now, {
          passkey: p.name,
          passkey_id: p.id,
          by: 'admin',
          sessions_ended: sessionsEnded,
          ...(removal.reason ? { reason: removal.reason } : {}),
          ...originDetail(removal.origin),
        }),
      );
    }
    return { removed: targets, sessionsEnded };
  });
}

export interface IssuedEnrolmentCode {
  /** Shown to the operator once; only its hash is stored. */
  readonly code: string;
  readonly expiresAt: number;
}

/**
 * A one-time code for `userId`'s first passkey (sign_in.first_passkey: operator_code), replacing
 * any earlier one; recorded without the code.
 */
export async function issueEnrolmentCode(
  ctx: ProtocolContext,
  userId: string,
  options: { readonly ttlMs: number; readonly origin?: DecisionOrigin },
): Promise<IssuedEnrolmentCode> {
  const code = newEnrolmentCode();
  const now = ctx.clock.now();
  const expiresAt = now + options.ttlMs;
  await ctx.store.write(async (tx) => {
    await tx.putEnrolmentCode(userId, enrolmentCodeHash(code) as string, expiresAt);
    await tx.appendActivity(
      userEvent('user.passkey_code_issued', userId, now, {
        by: 'admin',
        expires_at: new Date(expiresAt).toISOString(),
        ...originDetail(options.origin),
      }),
    );
  });
  return { code, expiresAt };
}

/** Ends every session of `userId` on every replica (the next page asks them to sign in again). */
export function signOutUser(
  ctx: ProtocolContext,
  userId: string,
  options: { readonly reason?: string; readonly origin?: DecisionOrigin },
): Promise<number> {
  const now = ctx.clock.now();
  return ctx.store.write(async (tx) => {
    const ended = await tx.deleteSessionsOf(userId);
    await tx.appendActivity(
      userEvent('user.signed_out', userId, now, {
        by: 'admin',
        sessions_ended: ended,
        ...(options.reason ? { reason: options.reason } : {}),
        ...originDetail(options.origin),
      }),
    );
    return ended;
  });
}

export interface RemovedUser {
  readonly hostsRevoked: number;
  readonly agentsRevoked: number;
  readonly passkeysRemoved: number;
  readonly sessionsEnded: number;
}

/**
 * §2.6 user deletion: every host linked to `userId` revoked with its agents (§8.5), and the
 * person's passkeys and sessions removed, all in one transaction. Repeating it changes nothing.
 */
export function removeUser(
  ctx: ProtocolContext,
  userId: string,
  options: { readonly reason?: string; readonly origin?: DecisionOrigin },
): Promise<RemovedUser> {
  return ctx.write(async (tx, after) => {
    let hostsRevoked = 0;
    let agentsRevoked = 0;
    for (const host of await tx.hosts({ userId })) {
      if (host.status === 'revoked') continue;
      hostsRevoked++;
      agentsRevoked += await revokeHostIn(ctx, tx, after, host, 'admin: user removed');
    }
    const passkeys = await tx.passkeys(userId);
    for (const p of passkeys) await tx.deletePasskey(p.id, userId);
    const sessionsEnded = await tx.deleteSessionsOf(userId);
    const removed = { hostsRevoked, agentsRevoked, passkeysRemoved: passkeys.length, sessionsEnded };
    await tx.appendActivity(
      userEvent('user.removed', userId, ctx.clock.now(), {
        by: 'admin',
        hosts_revoked: hostsRevoked,
        agents_revoked: agentsRevoked,
        passkeys_removed: passkeys.length,
        sessions_ended: sessionsEnded,
        ...(options.reason ? { reason: options.reason } : {}),
        ...originDetail(options.origin),
      }),
    );
    return removed;
  });
}
