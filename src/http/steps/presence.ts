/**
 * Proof of presence on the device page (§8.11; the rule is src/protocol/presence.ts): what the
 * page shows about it, the ceremony's options (`POST /device/passkey-options`) and the check the
 * Approve step runs before anything is granted. Kept apart from routes/device.ts, which calls
 * `view` when it shows a request and `check` when Approve is posted.
 */
import { ProtocolError } from '../../errors.js';
import { contentHash, decisionRefusal, type DeviceRequest } from '../../protocol/device.js';
import { approverChoice } from '../decision-choices.js';
import type { Passkeys } from '../../protocol/passkeys.js';
import {
  approvalBinding,
  capabilitiesNeedingPresence,
  presenceRequired,
  presenceScope,
  verifyPresence,
  type PresenceRule,
  type PresenceSubject,
} from '../../protocol/presence.js';
import type { PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/server';
import type { SessionRecord } from '../../storage/types.js';
import type { Exchange } from '../pipeline.js';
import { need } from '../pipeline.js';
import { presenceNotice } from '../views/device-presence.js';
import { PASSKEY_PAGE_HEADERS } from '../views/passkey-script.js';

export type PresenceOutcome =
  | { readonly kind: 'not-needed' }
  /** A valid assertion for this approval: it also counts as fresh authentication (§8.11). */
  | { readonly kind: 'verified' }
  | { readonly kind: 'refused'; readonly status: number; readonly text: string };

export interface PresenceView {
  /** HTML to put above the decision forms ('' when the request needs no passkey). */
  readonly html: string;
  readonly headers: Readonly<Record<string, string>>;
  /** Approve will ask for the passkey, which is also the fresh authentication: no password form. */
  readonly passkeyIsFreshAuth: boolean;
}

export class PresenceGate {
  constructor(
    private readonly passkeys: Passkeys,
    /** `approval.require_presence` of the policy in force (a reload may change it). */
    private readonly currentRule: () => PresenceRule,
  ) {}

  get rule(): PresenceRule {
    return this.currentRule();
  }

  async view(s: SessionRecord, r: DeviceRequest): Promise<PresenceView> {
    const subjects = withLinkUnlocks(r, r.capabilities);
    if (!presenceRequired(subjects, this.rule)) {
      return { html: '', headers: {}, passkeyIsFreshAuth: false };
    }
    const names = capabilitiesNeedingPresence(subjects, this.rule);
    const state = !this.passkeys.available
      ? 'unavailable'
      : (await this.passkeys.list(s.userId)).length === 0
        ? 'no-passkey'
        : 'ready';
    return {
      html: presenceNotice(names, this.rule === 'always', state),
      headers: state === 'ready' ? PASSKEY_PAGE_HEADERS : {},
      passkeyIsFreshAuth: state === 'ready',
    };
  }

  /**
   * The WebAuthn options for approving `r` with exactly the fields of the posted approve form; none
   * when what the form approves needs no passkey (the approver unchecked every capability that
   * does), so the page sends the form without a prompt, as `check` will accept it.
   */
  async options(
    x: Exchange,
    s: SessionRecord,
    r: DeviceRequest,
  ): Promise<PublicKeyCredentialRequestOptionsJSON | undefined> {
    const form = need(x.form, 'form');
    if (form.get('shown') !== contentHash(r)) {
      throw new ProtocolError(
        'approval_closed',
        'This request changed since you saw it. Nothing was decided: reload the page and review it again.',
      );
    }
    const refusal = decisionRefusal(r, s.userId);
    if (refusal) throw new ProtocolError('unauthorized', refusal);
    const choice = approverChoice(form, r);
    if (!choice.ok) throw new ProtocolError('invalid_request', `${choice.problem} Nothing was granted.`);
    const approving = r.capabilities.filter((c) => choice.decision.capabilities.includes(c.name));
    if (!presenceRequired(withLinkUnlocks(r, approving), this.rule)) return undefined;
    const binding = approvalBinding(r.approvalId, contentHash(r), form.entries());
    return this.passkeys.assertionOptions(presenceScope(s.idHash, s.userId, binding));
  }

  /**
   * Run by Approve after the request was found unchanged: whether approving `approving` (by
   * default everything requested) needs presence and, if so, whether the form carries a valid
   * assertion of one of `s.userId`'s passkeys bound to this approval and these very fields.
   */
  async check(
    x: Exchange,
    s: SessionRecord,
    r: DeviceRequest,
    approving: readonly PresenceSubject[] = r.capabilities,
  ): Promise<PresenceOutcome> {
    if (!presenceRequired(withLinkUnlocks(r, approving), this.rule)) return { kind: 'not-needed' };
    const refused = (text: string): PresenceOutcome => ({ kind: 'refused', status: 403, text });
    if (!this.passkeys.available) {
      return refused(
        "A passkey is required to approve this request, and passkeys cannot be used at this server's address.",
      );
    }
    if ((await this.passkeys.list(s.userId)).length === 0) {
      return refused(
        'A passkey is required to approve this request, and you have no passkey yet: add one on your account page first.',
      );
    }
    const form = need(x.form, 'form');
    const assertion = form.get('assertion') ?? '';
    if (assertion === '') {
      return refused(
        'A passkey is required to approve this request: confirm with your passkey when you click Approve (this needs JavaScript).',
      );
    }
    const binding = approvalBinding(r.approvalId, contentHash(r), form.entries());
    const result = await verifyPresence(this.passkeys, presenceScope(s.idHash, s.userId, binding), assertion);
    if (!result.ok) return refused(`Your passkey confirmation was not accepted. ${result.reason}`);
    return { kind: 'verified' };
  }
}

/**
 * What approving `approving` of `r` grants: those, and, when approving links the host, what its
 * delegated agents will then get without asking (§2.9). Approving a read-only request of a host
 * whose defaults change data grants those too, so it asks for presence as they would (§8.11).
 */
function withLinkUnlocks(r: DeviceRequest, approving: readonly PresenceSubject[]): PresenceSubject[] {
  const named = new Set(approving.map((c) => c.name));
  return [...approving, ...r.linkUnlocks.filter((c) => !named.has(c.name))];
}
