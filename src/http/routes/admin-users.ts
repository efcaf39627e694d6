/**
 * One person, for the operator (under the admin token like the rest of `/admin/`; the rules are
 * protocol/operator-users.ts):
 *
 *   GET  /admin/users/{user_id}/passkeys          the passkeys (at most 10), oldest first
 *   POST /admin/users/{user_id}/passkeys/remove   {passkey_id} or {all: true}, and reason?:
 *                                                 one or every passkey; the user's sessions end
 *   POST /admin/users/{user_id}/passkeys/enrolment-code   {ttl_seconds?}: the one-time code a
 *                                                 first passkey needs (sign_in.first_passkey)
 *   POST /admin/users/{user_id}/sign-out          {reason?}: every session of the user ends
 *   POST /admin/users/{user_id}/remove            {reason?}: the account was deleted (§2.6): its
 *                                                 hosts and their agents revoked, passkeys and
 *                                                 sessions removed
 *
 * The operator never adds a passkey (a person enrols their own) and never signs anyone in.
 */
import { ProtocolError } from '../../errors.js';
import { iso } from '../../protocol/context.js';
import type { ProtocolContext } from '../../protocol/context.js';
import { ENROLMENT_CODE_TTL_MS, MAX_ENROLMENT_CODE_TTL_MS } from '../../protocol/enrolment-codes.js';
import {
  issueEnrolmentCode,
  removeUser,
  removeUserPasskeys,
  signOutUser,
} from '../../protocol/operator-users.js';
import type { PasskeyRecord } from '../../storage/types.js';
import type { Exchange } from '../pipeline.js';
import { sendJson } from '../respond.js';
import type { Router } from '../router.js';
import type { AdminSteps } from './admin-steps.js';

/** The longest user id anywhere in the admin API (a path segment here, `user_id` in bodies). */
export const MAX_USER_ID = 200;

export interface AdminUserOptions extends AdminSteps {
  readonly ctx: ProtocolContext;
  /** sign_in.first_passkey is operator_code: only then are enrolment codes issued. */
  readonly firstPasskeyNeedsCode: boolean;
}

export function adminUserRoutes(
  router: Router,
  { ctx, firstPasskeyNeedsCode, read, change, bodyOf, stringOf, originOf }: AdminUserOptions,
): void {
  router.add(
    'GET',
    '/admin/users/:user_id/passkeys',
    read('list-passkeys', async (x) => {
      const userId = userIdOf(x);
      const passkeys = await ctx.store.passkeys(userId);
      sendJson(x.res, 200, { user_id: userId, passkeys: passkeys.map(view) });
    }),
  );

  router.add(
    'POST',
    '/admin/users/:user_id/passkeys/remove',
    change('remove-passkeys', async (x) => {
      const userId = userIdOf(x);
      const passkeyId = stringOf(x, 'passkey_id', 1024);
      const all = bodyOf(x).all;
      if (all !== undefined && typeof all !== 'boolean') {
        throw new ProtocolError('invalid_request', 'all must be true or false.');
      }
      // Removing every passkey is said in so many words, never the default of a missing id.
      if ((passkeyId === undefined) === (all !== true)) {
        throw new ProtocolError(
          'invalid_request',
          'Give passkey_id (one passkey) or "all": true (every passkey of the user), not both.',
        );
      }
      const reason = stringOf(x, 'reason');
      const { removed, sessionsEnded } = await removeUserPasskeys(ctx, userId, {
        ...(passkeyId !== undefined ? { passkeyId } : {}),
        ...(reason !== undefined ? { reason } : {}),
        origin: originOf(x),
      });
      sendJson(x.res, 200, { user_id: userId, removed: removed.map(view), sessions_ended: sessionsEnded });
    }),
  );

  router.add(
    'POST',
    '/admin/users/:user_id/sign-out',
    change('sign-out-user', async (x) => {
      const userId = userIdOf(x);
      const reason = stringOf(x, 'reason');
      const ended = await signOutUser(ctx, userId, {
        ...(reason !== undefined ? { reason } : {}),
        origin: originOf(x),
      });
      sendJson(x.res, 200, { user_id: userId, sessions_ended: ended });
    }),
  );

  router.add(
    'POST',
    '/admin/users/:user_id/remove',
    change('remove-user', async (x) => {
      const userId = userIdOf(x);
      const reason = stringOf(x, 'reason');
      const removed = await removeUser(ctx, userId, {
        ...(reason !== undefined ? { reason } : {}),
        origin: originOf(x),
      });
      sendJson(x.res, 200, {
        user_id: userId,
        hosts_revoked: removed.hostsRevoked,
        agents_revoked: removed.agentsRevoked,
        passkeys_removed: removed.passkeysRemoved,
        sessions_ended: removed.sessionsEnded,
      });
    }),
  );

  router.add(
    'POST',
    '/admin/users/:user_id/passkeys/enrolment-code',
    change('passkey-enrolment-code', async (x) => {
      const userId = userIdOf(x);
      if (!firstPasskeyNeedsCode) {
        throw new ProtocolError(
          'invalid_request',
          'This proxy asks for no enrolment code (sign_in.first_passkey is fresh_sign_in): a fresh sign-in enrols a first passkey.',
        );
      }
      const ttlMs = ttlOf(bodyOf(x));
      const issued = await issueEnrolmentCode(ctx, userId, { ttlMs, origin: originOf(x) });
      sendJson(x.res, 200, {
        user_id: userId,
        enrolment_code: issued.code,
        expires_at: iso(issued.expiresAt),
      });
    }),
  );
}

function ttlOf(body: Readonly<Record<string, unknown>>): number {
  const ttl = body.ttl_seconds;
  if (ttl === undefined) return ENROLMENT_CODE_TTL_MS;
  const max = MAX_ENROLMENT_CODE_TTL_MS / 1000;
  if (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < 60 || ttl > max) {
    throw new ProtocolError('invalid_request', `ttl_seconds must be a whole number from 60 to ${max}.`);
  }
  return ttl * 1000;
}

function userIdOf(x: Exchange): string {
  const userId = x.params.user_id ?? '';
  if (userId === '' || userId.length > MAX_USER_ID) {
    throw new ProtocolError('invalid_request', `user_id must be 1 to ${MAX_USER_ID} characters.`);
  }
  return userId;
}

/** What the operator sees of a passkey: never its public key or user handle. */
function view(p: PasskeyRecord): Record<string, unknown> {
  return {
    id: p.id,
    name: p.name,
    transports: p.transports,
    created_at: iso(p.createdAt),
    last_used_at: p.lastUsedAt === null ? null : iso(p.lastUsedAt),
  };
}
