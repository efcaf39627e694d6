/**
 * What each approve or deny activity record says about the decision (issue 16, §7, §8.11): who
 * decided, how they authenticated (password, password+totp, trusted_header, oidc with the ID
 * token's `acr`/`amr`, passkey, or the operator's admin token), from which client IP and user
 * agent, and the content hash of the request as the page showed it. The constraints of each
 * approved capability are recorded as proposed → approved → in effect (§2.13).
 */
import type { AuthMethod, GrantRecord, SessionRecord } from '../storage/types.js';

/** How the person (or the operator's API client) that decided reached the proxy. */
export interface DecisionOrigin {
  readonly authMethod: AuthMethod | 'admin_token';
  readonly acr?: string | null;
  readonly amr?: readonly string[] | null;
  readonly ip?: string;
  readonly userAgent?: string | null;
  /** The content hash the decision form carried (device.ts contentHash): what was shown. */
  readonly contentHash?: string;
}

/** User agents are the client's to choose: bounded, and kept as one line of plain text. */
export const MAX_USER_AGENT = 256;

/** A request's user-agent header as it may be stored and shown: capped, control characters out. */
export function cleanUserAgent(raw: string | readonly string[] | undefined): string | null {
  const value = Array.isArray(raw) ? raw.join(' ') : typeof raw === 'string' ? raw : '';
  // eslint-disable-next-line no-control-regex -- stripping control and bidi characters is the point
  const clean = value.replace(/[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]/g, ' ');
  const trimmed = clean.replace(/\s+/g, ' ').trim();
  if (trimmed === '') return null;
  return trimmed.length > MAX_USER_AGENT ? `${trimmed.slice(0, MAX_USER_AGENT - 1)}…` : trimmed;
}

/** A signed-in approver's decision, from their session and the request that carried it. */
export function originFromSession(
  session: SessionRecord,
  request: { readonly ip: string; readonly userAgent: string | readonly string[] | undefined },
  contentHash: string,
): DecisionOrigin {
  return {
    authMethod: session.authMethod,
    ...(session.acr ? { acr: session.acr } : {}),
    ...(session.amr?.length ? { amr: session.amr } : {}),
    ip: request.ip,
    userAgent: cleanUserAgent(request.userAgent),
    contentHash,
  };
}

/** The record's fields for `origin`, snake_case as activity details are. */
export function originDetail(origin: DecisionOrigin | undefined): Record<string, unknown> {
  if (!origin) return {};
  return {
    auth_method: origin.authMethod,
    ...(origin.acr ? { acr: origin.acr } : {}),
    ...(origin.amr?.length ? { amr: origin.amr } : {}),
    ...(origin.ip ? { client_ip: origin.ip } : {}),
    ...(origin.userAgent ? { user_agent: origin.userAgent } : {}),
    ...(origin.contentHash ? { content_hash: origin.contentHash } : {}),
  };
}

/** Per approved capability, its constraints as proposed, approved and in effect (§2.13). */
export function constraintTrail(grants: readonly GrantRecord[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const g of grants) {
    out[g.capability] = {
      proposed: g.proposedConstraints ?? null,
      approved: g.approvedConstraints ?? null,
      effective: g.constraints,
    };
  }
  return out;
}
