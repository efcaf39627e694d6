/**
 * Passkeys (WebAuthn, issue 11): enrolment, and assertions for signing in and for proof of
 * presence at approval (§8.11). Every ceremony asks for user verification ("required", §8.11:
 * "preferred" would let a device skip the biometric or PIN check an agent cannot pass) and is
 * verified here, server-side, with @simplewebauthn/server.
 *
 * Each challenge is issued for one purpose and one binding (what the person is confirming: an
 * approval and the hash of what the page showed, the passkey to remove…) and is derived from
 * them, so the authenticator's signature covers the binding too. It is kept server-side, good
 * once and for CHALLENGE_TTL_MS (webauthn-challenges.ts). The relying-party id and origin come
 * from the issuer: browsers refuse WebAuthn on an IP address or on plain http other than
 * localhost, so there passkeys are unavailable.
 */
import { createHash, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import type {
  AuthenticationResponseJSON,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON,
  VerifiedAuthenticationResponse,
} from '@simplewebauthn/server';
import type { Clock } from '../clock.js';
import type { SignInSettings } from '../config/sign-in.js';
import { ProtocolError } from '../errors.js';
import type { PasskeyRecord, SessionRecord, Store } from '../storage/types.js';
import { userEvent } from './activity.js';
import { enrolmentCodeHash } from './enrolment-codes.js';
import { ChallengeStore, type ChallengeBounds } from './webauthn-challenges.js';

/**
 * @simplewebauthn/server, imported at the first ceremony: loading it costs start-up about 0.3 s
 * and 20 MB, which a proxy without passkeys (or before anyone uses them) need not pay.
 */
let webauthn: Promise<typeof import('@simplewebauthn/server')> | undefined;
const loadWebAuthn = (): Promise<typeof import('@simplewebauthn/server')> =>
  (webauthn ??= import('@simplewebauthn/server'));

/** How long the browser may take for one ceremony (WebAuthn `timeout`). */
export const CEREMONY_TIMEOUT_MS = 60_000;

/** Open challenges: two minutes each, 5 per session or client address, 10,000 in all. */
export const CHALLENGE_BOUNDS: ChallengeBounds = { ttlMs: 2 * 60_000, perOwner: 5, total: 10_000 };

/** Passkeys one user may enrol. */
export const MAX_PASSKEYS_PER_USER = 10;

/** A passkey's name as shown on the account page. */
export const MAX_PASSKEY_NAME = 64;
const TOO_MANY = `You already have ${MAX_PASSKEYS_PER_USER} passkeys, the most allowed.`;
export const BAD_CODE =
  'The enrolment code is not right, was already used, or has expired: ask your administrator for a new one.';

/** The JSON a browser sends back for one ceremony: an assertion is ~1 KB, an enrolment ~2 KB. */
const MAX_RESPONSE_CHARS = 16 * 1024;

export interface RelyingParty {
  /** The WebAuthn RP id: the issuer's host name. */
  readonly id: string;
  /** The only origin ceremonies are accepted from: the issuer's. */
  readonly origin: string;
  /** Shown by the browser's passkey prompt. */
  readonly name: string;
}

/** The relying party an issuer gives, or undefined when browsers would refuse WebAuthn there. */
export function relyingParty(issuer: string, name: string): RelyingParty | undefined {
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    return undefined;
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) !== 0) return undefined;
  const local = host === 'localhost' || host.endsWith('.localhost');
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && local)) return undefined;
  return { id: host, origin: url.origin, name };
}

/** What a ceremony is for; a challenge of one purpose is never accepted for another. */
export type CeremonyPurpose = 'sign-in' | 'approve' | 'enrol' | 'confirm';

interface Pending {
  readonly purpose: CeremonyPurpose;
  readonly kind: 'assertion' | 'registration';
  /** The user who must answer; null for usernameless sign-in. */
  readonly userId: string | null;
  readonly binding: string;
  /** Registration only: the user handle given to the authenticator. */
  readonly userHandle?: string;
}

export interface CeremonyScope {
  readonly purpose: CeremonyPurpose;
  /** Whose open challenges this counts against (a session's id hash, or `ip:` + address). */
  readonly owner: string;
  readonly userId: string | null;
  /** What is being confirmed; the answer must come back for the very same binding. */
  readonly binding: string;
}

export type AssertionResult =
  { readonly ok: true; readonly passkey: PasskeyRecord } | { readonly ok: false; readonly reason: string };

export type RegistrationResult =
  { readonly ok: true; readonly passkey: PasskeyRecord } | { readonly ok: false; readonly reason: string };

const UNKNOWN_CHALLENGE = 'This passkey confirmation is unknown, was already used, or has expired.';

export class Passkeys {
  readonly #challenges: ChallengeStore<Pending>;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    /** Read per call: the issuer is known only once the server listens. */
    private readonly rp: () => RelyingParty | undefined,
    bounds: ChallengeBounds = CHALLENGE_BOUNDS,
    /** sign_in.first_passkey: operator_code (protocol/enrolment-codes.ts). */
    readonly firstNeedsCode = false,
  ) {
    this.#challenges = new ChallengeStore(store, clock, bounds);
  }

  get available(): boolean {
    return this.rp() !== undefined;
  }

  list(userId: string): Promise<PasskeyRecord[]> {
    return this.store.passkeys(userId);
  }

  /** Options for `navigator.credentials.create()`: a new passkey for `scope.userId`. */
  async registrationOptions(scope: CeremonyScope): Promise<PublicKeyCredentialCreationOptionsJSON> {
    const rp = this.#need();
    const userId = scope.userId as string;
    const existing = await this.store.passkeys(userId);
    if (existing.length >= MAX_PASSKEYS_PER_USER) {
      throw new ProtocolError(
        'invalid_request',
        `You already have ${MAX_PASSKEYS_PER_USER} passkeys, the most allowed: remove one first.`,
      );
    }
    // The same handle for all of a user's passkeys; random, so it says nothing about who they are.
    const userHandle = existing[0]?.userHandle ?? randomBytes(32).toString('base64url');
    const challenge = await this.#issue(scope, 'registration', userHandle);
    const { generateRegistrationOptions } = await loadWebAuthn();
    return generateRegistrationOptions({
      rpName: rp.name,
      rpID: rp.id,
      userName: userId,
      userDisplayName: userId,
      userID: Buffer.from(userHandle, 'base64url'),
      challenge: Buffer.from(challenge, 'base64url'),
      timeout: CEREMONY_TIMEOUT_MS,
      attestationType: 'none',
      excludeCredentials: existing.map((p) => ({ id: p.id, transports: [...p.transports] })),
      authenticatorSelection: { residentKey: 'preferred', userVerification: 'required' },
    });
  }

  /**
   * Verifies an enrolment answer and stores the new passkey. A first passkey takes the operator's
   * `enrolmentCode` with it when `firstNeedsCode`.
   */
  async register(
    scope: CeremonyScope,
    responseText: string,
    name: string,
    enrolmentCode = '',
  ): Promise<RegistrationResult> {
    const rp = this.#need();
    const parsed = parseResponse(responseText);
    if (!parsed) return { ok: false, reason: 'The browser sent no usable passkey.' };
    const pending = await this.#take(scope, 'registration', parsed.challenge);
    if (!pending) return { ok: false, reason: UNKNOWN_CHALLENGE };
    const userId = scope.userId as string;
    // Checked again in the transaction below; here it spares the verification.
    if ((await this.store.passkeys(userId)).length >= MAX_PASSKEYS_PER_USER)
      return { ok: false, reason: TOO_MANY };
    let info;
    try {
      const { verifyRegistrationResponse } = await loadWebAuthn();
      const verified = await verifyRegistrationResponse({
        response: parsed.json as unknown as RegistrationResponseJSON,
        expectedChallenge: parsed.challenge,
        expectedOrigin: rp.origin,
        expectedRPID: rp.id,
        requireUserPresence: true,
        requireUserVerification: true,
      });
      if (!verified.verified) return { ok: false, reason: 'The passkey could not be verified.' };
      info = verified.registrationInfo;
    } catch (err) {
      return { ok: false, reason: `The passkey could not be verified: ${(err as Error).message}` };
    }
    const now = this.clock.now();
    const passkey: PasskeyRecord = {
      id: info.credential.id,
      userId,
      userHandle: pending.userHandle as string,
      publicKey: info.credential.publicKey,
      counter: info.credential.counter,
      transports: (info.credential.transports ?? []).slice(0, 8),
      name: cleanName(name) || `Passkey added ${new Date(now).toISOString().slice(0, 10)}`,
      createdAt: now,
      lastUsedAt: null,
    };
    // One transaction: the cap counted here holds against a concurrent enrolment (the other is
    // re-run or waits, and then counts this one), and the record commits with the passkey.
    const codeHash = enrolmentCodeHash(enrolmentCode);
    const refusal = await this.store.write(async (tx): Promise<string | undefined> => {
      const held = (await tx.passkeys(userId)).length;
      if (held >= MAX_PASSKEYS_PER_USER) return TOO_MANY;
      if (await tx.passkey(passkey.id)) return 'This passkey is already enrolled.';
      // Taken with the passkey: a code enrols one passkey, and a refused enrolment keeps it.
      if (held === 0 && this.firstNeedsCode) {
        if (codeHash === undefined || !(await tx.takeEnrolmentCode(userId, codeHash, now))) return BAD_CODE;
      }
      await tx.insertPasskey(passkey);
      await tx.appendActivity(userEvent('user.passkey_added', userId, now, { passkey: passkey.name }));
      return undefined;
    });
    if (refusal !== undefined) return { ok: false, reason: refusal };
    return { ok: true, passkey };
  }

  /** Whether `typed` is `userId`'s enrolment code, unexpired: checked before the browser's prompt. */
  async enrolmentCodeHolds(userId: string, typed: string): Promise<boolean> {
    const hash = enrolmentCodeHash(typed);
    return hash !== undefined && this.store.hasEnrolmentCode(userId, hash, this.clock.now());
  }

  /**
   * Options for `navigator.credentials.get()`. With a user, only their passkeys are allowed; with
   * none (sign-in), any discoverable passkey of this site.
   */
  async assertionOptions(scope: CeremonyScope): Promise<PublicKeyCredentialRequestOptionsJSON> {
    const rp = this.#need();
    const allowed = scope.userId === null ? [] : await this.store.passkeys(scope.userId);
    if (scope.userId !== null && allowed.length === 0) {
      throw new ProtocolError('invalid_request', 'You have no passkey yet: add one on your account page.');
    }
    const challenge = await this.#issue(scope, 'assertion');
    const { generateAuthenticationOptions } = await loadWebAuthn();
    return generateAuthenticationOptions({
      rpID: rp.id,
      challenge: Buffer.from(challenge, 'base64url'),
      timeout: CEREMONY_TIMEOUT_MS,
      userVerification: 'required',
      ...(allowed.length > 0
        ? { allowCredentials: allowed.map((p) => ({ id: p.id, transports: [...p.transports] })) }
        : {}),
    });
  }

  /** Verifies an assertion for exactly `scope`; on success the passkey's counter moves on. */
  async verifyAssertion(scope: CeremonyScope, responseText: string): Promise<AssertionResult> {
    const rp = this.rp();
    if (!rp) return { ok: false, reason: 'Passkeys are not available at this address.' };
    const parsed = parseResponse(responseText);
    if (!parsed) return { ok: false, reason: 'The browser sent no usable passkey confirmation.' };
    if (!(await this.#take(scope, 'assertion', parsed.challenge)))
      return { ok: false, reason: UNKNOWN_CHALLENGE };
    const response = parsed.json as unknown as AuthenticationResponseJSON;
    const passkey = typeof response.id === 'string' ? await this.store.passkey(response.id) : undefined;
    if (!passkey || (scope.userId !== null && passkey.userId !== scope.userId)) {
      return { ok: false, reason: 'That passkey is not one of yours on this server.' };
    }
    const handle = response.response?.userHandle;
    if (handle !== undefined && handle !== passkey.userHandle) {
      return { ok: false, reason: 'That passkey is not one of yours on this server.' };
    }
    let verified: VerifiedAuthenticationResponse;
    try {
      const { verifyAuthenticationResponse } = await loadWebAuthn();
      verified = await verifyAuthenticationResponse({
        response,
        expectedChallenge: parsed.challenge,
        expectedOrigin: rp.origin,
        expectedRPID: rp.id,
        credential: {
          id: passkey.id,
          publicKey: new Uint8Array(passkey.publicKey),
          counter: passkey.counter,
          transports: [...passkey.transports],
        },
        // §8.11: the UV flag must be set; "preferred" would let an agent with the browser pass.
        requireUserVerification: true,
      });
    } catch (err) {
      return { ok: false, reason: `The passkey confirmation was not valid: ${(err as Error).message}` };
    }
    if (!verified.verified || !verified.authenticationInfo.userVerified) {
      return { ok: false, reason: 'The passkey did not verify you (no fingerprint, face or PIN).' };
    }
    // Outside the try: a store failure is the request's error (503), never shown as the passkey's.
    const now = this.clock.now();
    await this.store.recordPasskeyUse(passkey.id, verified.authenticationInfo.newCounter, now);
    return {
      ok: true,
      passkey: { ...passkey, counter: verified.authenticationInfo.newCounter, lastUsedAt: now },
    };
  }

  /**
   * Removes one of `userId`'s passkeys; false when they have none by that id. Every other session
   * of theirs ends with it, as when the operator removes one: the passkey may be gone because it
   * was lost, and whoever holds it may have signed in with it. `current`, the session asking, stays.
   */
  async remove(userId: string, id: string, current: SessionRecord): Promise<boolean> {
    const now = this.clock.now();
    const removed = await this.store.write(async (tx) => {
      const passkey = await tx.passkey(id);
      if (!passkey || passkey.userId !== userId || !(await tx.deletePasskey(id, userId))) return false;
      const sessionsEnded = Math.max(0, (await tx.deleteSessionsOf(userId)) - 1);
      await tx.appendActivity(
        userEvent('user.passkey_removed', userId, now, {
          passkey: passkey.name,
          sessions_ended: sessionsEnded,
        }),
      );
      return true;
    });
    // The session that asked was deleted with the others: it comes back as it was.
    if (removed) await this.store.insertSession(current);
    return removed;
  }

  #need(): RelyingParty {
    const rp = this.rp();
    if (!rp) {
      throw new ProtocolError(
        'invalid_request',
        'Passkeys are not available at this address: browsers allow them only on https (or http://localhost), never on an IP address.',
      );
    }
    return rp;
  }

  /** A fresh challenge derived from the purpose and binding, remembered for `scope.owner`. */
  async #issue(scope: CeremonyScope, kind: Pending['kind'], userHandle?: string): Promise<string> {
    const nonce = randomBytes(32).toString('base64url');
    const challenge = createHash('sha256')
      .update(`agent-auth-proxy webauthn\0${scope.purpose}\0${scope.binding}\0${nonce}`)
      .digest('base64url');
    const pending: Pending = {
      purpose: scope.purpose,
      kind,
      userId: scope.userId,
      binding: scope.binding,
      ...(userHandle !== undefined ? { userHandle } : {}),
    };
    if (!(await this.#challenges.issue(scope.owner, challenge, pending))) {
      throw new ProtocolError(
        'temporarily_unavailable',
        'Too many passkey ceremonies are open on this server right now; try again in a minute.',
      );
    }
    return challenge;
  }

  /** The pending challenge, taken (single use), if it was issued for exactly this scope. */
  async #take(scope: CeremonyScope, kind: Pending['kind'], challenge: string): Promise<Pending | undefined> {
    const issued = await this.#challenges.take(challenge);
    if (!issued) return undefined;
    const p = issued.data;
    const same =
      issued.owner === scope.owner &&
      p.kind === kind &&
      p.purpose === scope.purpose &&
      p.userId === scope.userId &&
      p.binding === scope.binding;
    return same ? p : undefined;
  }
}

/**
 * Whether a passkey may sign `userId` in: only a configured local account. With OIDC or a trusted
 * header the organisation's sign-in decides who may enter (a user removed there must be out), so
 * their passkeys prove presence at approval but never replace that sign-in. Removing a local user
 * from the config also stops their passkeys.
 */
export function mayStillSignIn(settings: SignInSettings, userId: string): boolean {
  return settings.localUsers.has(userId);
}

/**
 * What adding a passkey needs: a user who already has one confirms with it (so that whoever holds
 * the browser, an agent included, cannot add their own authenticator next to it, §8.11); a user
 * without one needs a fresh sign-in (sign_in.fresh_auth), and with `firstNeedsCode` the operator's
 * one-time enrolment code too (sign_in.first_passkey).
 */
export function enrolmentNeeds(
  hasPasskeys: boolean,
  freshSignIn: boolean,
  firstNeedsCode = false,
): EnrolmentNeeds {
  if (hasPasskeys) return 'confirm';
  if (!freshSignIn) return 'sign-in-again';
  return firstNeedsCode ? 'code' : 'ok';
}

/** Adding a passkey needs: a confirmation with one, a newer sign-in, the operator's code, or nothing more. */
export type EnrolmentNeeds = 'confirm' | 'sign-in-again' | 'code' | 'ok';

/** Plain text, one line, capped: a passkey name is shown back to its owner only. */
function cleanName(name: string): string {
  // eslint-disable-next-line no-control-regex -- control characters have no place in a name
  const oneLine = name.replace(/[\u0000-\u001f\u007f]/g, ' ');
  return oneLine.trim().slice(0, MAX_PASSKEY_NAME);
}

/** The browser's JSON and the challenge its client data names, or undefined if malformed. */
function parseResponse(text: string): { json: Record<string, unknown>; challenge: string } | undefined {
  if (text.length === 0 || text.length > MAX_RESPONSE_CHARS) return undefined;
  try {
    const json = JSON.parse(text) as unknown;
    if (typeof json !== 'object' || json === null || Array.isArray(json)) return undefined;
    const response = (json as { response?: unknown }).response;
    if (typeof response !== 'object' || response === null) return undefined;
    const clientData = (response as { clientDataJSON?: unknown }).clientDataJSON;
    if (typeof clientData !== 'string') return undefined;
    const decoded = JSON.parse(Buffer.from(clientData, 'base64url').toString('utf8')) as unknown;
    const challenge = (decoded as { challenge?: unknown } | null)?.challenge;
    if (typeof challenge !== 'string' || !/^[A-Za-z0-9_-]{43}$/.test(challenge)) return undefined;
    return { json: json as Record<string, unknown>, challenge };
  } catch {
    return undefined;
  }
}
