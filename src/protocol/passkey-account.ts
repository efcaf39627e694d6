/**
 * Managing one's own passkeys on `{issuer}/account` (issue 11). Adding one needs a fresh sign-in
 * when the user has none yet (and, with sign_in.first_passkey: operator_code, the operator's
 * one-time code), and otherwise a confirmation with a passkey they already have;
 * removing one needs a confirmation with any of their passkeys. So once someone has a passkey,
 * only its holder changes the set: an agent driving the browser (§8.11) can neither slip in its own
 * authenticator nor remove the person's to make room for one.
 */
import { ProtocolError } from '../errors.js';
import type { PasskeyRecord, SessionRecord } from '../storage/types.js';
import { BAD_CODE, enrolmentNeeds, type CeremonyScope, type Passkeys } from './passkeys.js';
import { formFieldsHash } from './presence.js';
import type {
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
} from '@simplewebauthn/server';

type Fields = Iterable<readonly [string, string]>;

function owner(session: SessionRecord): string {
  return `session:${session.idHash}`;
}

function enrolScope(session: SessionRecord, purpose: 'enrol' | 'confirm', fields: Fields): CeremonyScope {
  return {
    purpose,
    owner: owner(session),
    userId: session.userId,
    binding: `enrol ${formFieldsHash(fields)}`,
  };
}

function removalScope(session: SessionRecord, id: string): CeremonyScope {
  return { purpose: 'confirm', owner: owner(session), userId: session.userId, binding: `remove ${id}` };
}

export interface CeremonyOptions {
  readonly registration?: PublicKeyCredentialCreationOptionsJSON;
  readonly assertion?: PublicKeyCredentialRequestOptionsJSON;
}

/** The ceremonies adding a passkey takes now, bound to the add form's fields (its name). */
export async function enrolmentOptions(
  passkeys: Passkeys,
  session: SessionRecord,
  fresh: boolean,
  fields: Fields,
): Promise<CeremonyOptions> {
  const list = [...fields];
  const needs = enrolmentNeeds(
    (await passkeys.list(session.userId)).length > 0,
    fresh,
    passkeys.firstNeedsCode,
  );
  if (needs === 'sign-in-again') {
    throw new ProtocolError('unauthorized', 'Your sign-in is too old to add a passkey: sign in again first.');
  }
  // Told before the browser asks for a fingerprint; the code is used up only with the passkey.
  if (needs === 'code') {
    const typed = list.find(([name]) => name === 'enrolment_code')?.[1] ?? '';
    if (!(await passkeys.enrolmentCodeHolds(session.userId, typed))) {
      throw new ProtocolError('invalid_request', BAD_CODE);
    }
  }
  const registration = await passkeys.registrationOptions(enrolScope(session, 'enrol', list));
  if (needs !== 'confirm') return { registration };
  return { registration, assertion: await passkeys.assertionOptions(enrolScope(session, 'confirm', list)) };
}

export type AccountChange =
  | { readonly ok: true; readonly passkey: PasskeyRecord }
  | { readonly ok: false; readonly status: number; readonly reason: string };

/** Adds the passkey the form carries, after the checks enrolmentOptions announced. */
export async function addPasskey(
  passkeys: Passkeys,
  session: SessionRecord,
  fresh: boolean,
  form: URLSearchParams,
): Promise<AccountChange> {
  const fields = [...form.entries()];
  const registration = form.get('registration') ?? '';
  if (registration === '') {
    return {
      ok: false,
      status: 400,
      reason: 'Your browser creates the passkey: this needs JavaScript, and the prompt must be completed.',
    };
  }
  const needs = enrolmentNeeds(
    (await passkeys.list(session.userId)).length > 0,
    fresh,
    passkeys.firstNeedsCode,
  );
  if (needs === 'sign-in-again') {
    return {
      ok: false,
      status: 403,
      reason: 'Your sign-in is too old to add a passkey: sign in again first.',
    };
  }
  if (needs === 'confirm') {
    const confirmed = await passkeys.verifyAssertion(
      enrolScope(session, 'confirm', fields),
      form.get('assertion') ?? '',
    );
    if (!confirmed.ok) {
      return {
        ok: false,
        status: 403,
        reason: `Adding a passkey needs a confirmation with one you already have. ${confirmed.reason}`,
      };
    }
  }
  const added = await passkeys.register(
    enrolScope(session, 'enrol', fields),
    registration,
    form.get('name') ?? '',
    form.get('enrolment_code') ?? '',
  );
  return added.ok ? added : { ok: false, status: 400, reason: added.reason };
}

/** The confirmation removing passkey `id` takes. */
export async function removalOptions(
  passkeys: Passkeys,
  session: SessionRecord,
  id: string,
): Promise<CeremonyOptions> {
  if (!(await passkeys.list(session.userId)).some((p) => p.id === id)) {
    throw new ProtocolError('not_found', 'You have no passkey with that id.');
  }
  return { assertion: await passkeys.assertionOptions(removalScope(session, id)) };
}

/** Removes passkey `id` of the signed-in user once one of their passkeys confirmed it. */
export async function removePasskey(
  passkeys: Passkeys,
  session: SessionRecord,
  form: URLSearchParams,
): Promise<AccountChange> {
  const id = form.get('id') ?? '';
  const passkey = (await passkeys.list(session.userId)).find((p) => p.id === id);
  if (!passkey) return { ok: false, status: 404, reason: 'You have no passkey with that id.' };
  const confirmed = await passkeys.verifyAssertion(removalScope(session, id), form.get('assertion') ?? '');
  if (!confirmed.ok) {
    return {
      ok: false,
      status: 403,
      reason: `Removing a passkey needs a confirmation with one of your passkeys. ${confirmed.reason}`,
    };
  }
  if (!(await passkeys.remove(session.userId, id, session))) {
    return { ok: false, status: 404, reason: 'You have no passkey with that id.' };
  }
  return { ok: true, passkey };
}
