/**
 * What an approver is told of a new approval request (§7.2: "the server notifies the user through
 * its notification channel"), and where such notices go. The shapes only: notifications.ts
 * builds them, src/notify/webhook.ts delivers them.
 */
import type { AgentRecord, ApprovalRecord } from '../storage/types.js';

/** Which approval requests are announced (proxy config `notifications.webhook.events`). */
export type NoticeEvent = 'ciba' | 'device' | 'per_call';

export interface ApprovalNotice {
  readonly type: 'approval.requested';
  readonly event: Exclude<NoticeEvent, 'per_call'>;
  readonly approval: {
    readonly id: string;
    readonly kind: ApprovalRecord['kind'];
    readonly method: ApprovalRecord['method'];
    /** Where the approver decides: the inbox for CIBA, the device page (code filled in) otherwise. */
    readonly url: string;
    /** Device requests: the code the approver confirms on the page (it is in `url` too). */
    readonly user_code?: string;
    /** Agent-chosen (§8.10): show as plain text only. */
    readonly binding_message?: string;
    readonly created_at: string;
    readonly expires_at: string;
  };
  /** Who should decide: the CIBA login hint, or the user the agent already acts for; else null. */
  readonly user_id: string | null;
  /** `name` is agent-chosen (§8.10): show as plain text only, never as a link or markup. */
  readonly agent: { readonly id: string; readonly name: string; readonly mode: AgentRecord['mode'] };
  /** `name` is agent-chosen, like the agent's. */
  readonly host: { readonly id: string; readonly name: string | null };
  readonly capabilities: readonly {
    readonly name: string;
    readonly description?: string;
    /** The upstream HTTP method; anything but GET/HEAD can change data. */
    readonly method?: string;
    readonly high_risk: boolean;
    readonly constraints?: Readonly<Record<string, unknown>>;
  }[];
}

/**
 * A per-call approval (issue 16 §1): one execution waits for its addressee. The arguments are
 * left out (§9.5: they may hold personal data, and a chat channel is no place for them); the
 * page at `approval.url` shows them and is where the person decides, with a passkey.
 */
export interface PerCallNotice {
  readonly type: 'approval.requested';
  readonly event: 'per_call';
  readonly approval: {
    readonly id: string;
    readonly kind: 'per_call';
    readonly url: string;
    readonly created_at: string;
    readonly expires_at: string;
  };
  /** The addressee; null: whichever of the policy's `approval.approvers` (an autonomous agent). */
  readonly user_id: string | null;
  readonly agent: ApprovalNotice['agent'];
  readonly host: ApprovalNotice['host'];
  readonly capability: { readonly name: string; readonly description?: string; readonly method: string };
}

/** Where notices go; it must return at once (delivery happens in the background). */
export interface ApprovalNotifier {
  approvalRequested(notice: ApprovalNotice | PerCallNotice): void;
}
