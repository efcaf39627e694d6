/**
 * One per-call approval on the pages (issue 16 §1), for its addressee only (anyone else gets 404
 * and nothing changes):
 *
 *   GET  /approvals/calls/{id}                  the call: agent, host, capability, arguments
 *   POST /approvals/calls/{id}/passkey-options  WebAuthn options bound to what the page showed
 *   POST /approvals/calls/{id}/approve          passkey assertion → claim once → execute → outcome
 *   POST /approvals/calls/{id}/deny             the call fails with approval_denied
 *
 * Approve always needs a passkey assertion with user verification (§8.11), whatever
 * `approval.require_presence` says, and no password can stand in for it: the challenge is derived
 * from a binding that names the call and its shown hash (protocol/per-call.ts), and the server
 * recomputes that hash from the stored row before anything runs.
 */
import type { ServerResponse } from 'node:http';
import { ProtocolError } from '../../errors.js';
import type { ProtocolContext } from '../../protocol/context.js';
import { displayText } from '../../protocol/approvals.js';
import type { Passkeys } from '../../protocol/passkeys.js';
import { lookUpPerCall, shownHash } from '../../protocol/per-call.js';
import { claimPerCall, denyPerCall, outcomeUnknownAfterMs } from '../../protocol/per-call-decide.js';
import { presenceScope } from '../../protocol/presence.js';
import type { PerCallRecord, SessionRecord } from '../../storage/types.js';
import { escapeHtml, htmlPage, sendHtml, signInLink } from '../html.js';
import type { PageAuth } from '../page-auth.js';
import { need, step, type Exchange } from '../pipeline.js';
import type { RateLimits } from '../rate-limits.js';
import { sendJson } from '../respond.js';
import type { Router } from '../router.js';
import { perIp } from '../steps/limits.js';
import { page, pageForm, session } from '../steps/page.js';
import { message, whoAmI } from '../views/device.js';
import { inboxLink } from '../views/inbox.js';
import { PASSKEY_PAGE_HEADERS } from '../views/passkey-script.js';
import { nameWarnings } from '../../protocol/request-warnings.js';
import { perCallView, type PasskeyState, type PerCallParties } from '../views/per-call.js';

export interface PerCallRouteOptions {
  readonly ctx: ProtocolContext;
  readonly limits: RateLimits;
  readonly auth: PageAuth;
  readonly serverName: string;
  readonly passkeys: Passkeys;
  /** Executes a claimed call once and stores its outcome (http/per-call-run.ts). */
  readonly run: (r: PerCallRecord, requestId: string) => Promise<void>;
  /** The longest deadline of one upstream call, by the configuration in force (Executor). */
  readonly longestCallMs: () => number;
}

/** What the assertion of an approval of call `id` is bound to (the challenge derives from it). */
function binding(id: string, hash: string): string {
  return `approve-call ${id} ${hash}`;
}

/**
 * The agent and host names and the capability, for the page and the inbox card, with what the
 * names warn of (§8.10: a brand or this service's own name, mixed alphabets) as on every
 * approval page. `serverName`: discovery's provider_name.
 */
export async function partiesOf(
  ctx: ProtocolContext,
  r: PerCallRecord,
  serverName: string,
): Promise<PerCallParties> {
  const agentName = (await ctx.store.agent(r.agentId))?.name ?? null;
  const hostName = (await ctx.store.host(r.hostId))?.name ?? null;
  const { warnNames } = ctx.policy.approval;
  return {
    agentName: agentName ?? r.agentId,
    hostName,
    capability: ctx.catalog.get(r.capability),
    warnings: [
      ...nameWarnings('agent name', agentName, serverName, warnNames),
      ...nameWarnings('host name', hostName, serverName, warnNames),
    ],
  };
}

export function perCallRoutes(router: Router, options: PerCallRouteOptions): void {
  const { ctx, limits, auth, serverName, passkeys, run } = options;
  const title = `Approve a call — ${serverName}`;
  const send = (
    res: ServerResponse,
    status: number,
    parts: string[],
    headers: Readonly<Record<string, string>> = {},
  ): void => {
    sendHtml(res, status, htmlPage(title, [`<h1>${escapeHtml(title)}</h1>`, ...parts].join('\n')), headers);
  };
  const notFound = (x: Exchange, s: SessionRecord): void => {
    x.decision.outcome = 'deny';
    x.decision.reason = 'no such open call for this user';
    send(x.res, 404, [
      whoAmI(s),
      message('error', 'No open call of yours has that id. It may have expired or been decided already.'),
      inboxLink(),
    ]);
  };
  const passkeyState = async (s: SessionRecord): Promise<PasskeyState> =>
    !passkeys.available
      ? 'unavailable'
      : (await passkeys.list(s.userId)).length === 0
        ? 'no-passkey'
        : 'ready';
  const show = async (
    x: Exchange,
    s: SessionRecord,
    r: PerCallRecord,
    status: number,
    note?: string,
  ): Promise<void> => {
    const state = await passkeyState(s);
    const view = perCallView(r, await partiesOf(ctx, r, serverName), s, shownHash(r), state, ctx.clock.now());
    send(
      x.res,
      status,
      [whoAmI(s), ...(note ? [note] : []), view, inboxLink()],
      state === 'ready' ? PASSKEY_PAGE_HEADERS : {},
    );
  };
  const found = async (x: Exchange, s: SessionRecord): Promise<PerCallRecord | undefined> => {
    const r = await lookUpPerCall(ctx, x.params.id ?? '', s.userId);
    if (!r) notFound(x, s);
    return r;
  };
  const signedIn = pageForm(auth, limits, { token: true });

  router.add('GET', '/approvals/calls/:id', [
    page,
    perIp(limits),
    session(auth),
    step('show', async (x) => {
      const s = x.session;
      if (!s) {
        const back = `/approvals/calls/${encodeURIComponent((x.params.id ?? '').slice(0, 100))}`;
        send(x.res, 200, [
          '<p><strong>An AI agent asks you to approve one call.</strong> Sign in to see what it wants to run.</p>',
          signInLink(back),
        ]);
        return;
      }
      const r = await found(x, s);
      if (r) await show(x, s, r, 200);
    }),
  ]);

  router.add('POST', '/approvals/calls/:id/passkey-options', [
    ...signedIn.filter((st) => st.name !== 'page'),
    step('options', async (x) => {
      const s = need(x.session, 'session');
      const r = await lookUpPerCall(ctx, x.params.id ?? '', s.userId);
      if (!r) throw new ProtocolError('approval_not_found', 'No open call of yours has that id any more.');
      const hash = shownHash(r);
      if (need(x.form, 'form').get('shown') !== hash) {
        throw new ProtocolError(
          'approval_closed',
          'This call is not the one your page shows: reload the page.',
        );
      }
      const scope = presenceScope(s.idHash, s.userId, binding(r.id, hash));
      sendJson(x.res, 200, { assertion: await passkeys.assertionOptions(scope) });
    }),
  ]);

  router.add('POST', '/approvals/calls/:id/approve', [
    ...signedIn,
    step('approve', async (x) => {
      const s = need(x.session, 'session');
      const r = await found(x, s);
      if (!r) return;
      const refuse = (status: number, text: string, reason: string): Promise<void> => {
        x.decision.outcome = 'deny';
        x.decision.reason = reason;
        return show(x, s, r, status, message('error', `${text} Nothing was executed.`));
      };
      const form = need(x.form, 'form');
      const shown = form.get('shown') ?? '';
      // The hash is recomputed from the stored row: the page must have shown exactly this call.
      if (shown !== shownHash(r)) {
        await refuse(
          409,
          'This call is not the one your page showed. Review it again.',
          'shown hash mismatch',
        );
        return;
      }
      const assertion = form.get('assertion') ?? '';
      if (assertion === '') {
        await refuse(403, 'Approving a call needs your passkey (this needs JavaScript).', 'no assertion');
        return;
      }
      const verified = await passkeys.verifyAssertion(
        presenceScope(s.idHash, s.userId, binding(r.id, shown)),
        assertion,
      );
      if (!verified.ok) {
        await refuse(
          403,
          `Your passkey confirmation was not accepted. ${verified.reason}`,
          'assertion refused',
        );
        return;
      }
      const claimed = await claimPerCall(
        ctx,
        r.id,
        shown,
        { actor: s.userId, authMethod: 'passkey' },
        outcomeUnknownAfterMs(options.longestCallMs()),
      );
      if (!claimed) {
        notFound(x, s);
        return;
      }
      await run(claimed, x.requestId);
      const after = await ctx.store.perCall(r.id);
      const text =
        after?.status === 'completed'
          ? 'Approved. The call ran once and its result is waiting for the agent.'
          : after?.status === 'failed'
            ? `Approved, but the call could not be completed: ${typeof after.error?.message === 'string' ? after.error.message : 'it failed.'}`
            : 'Approved. The call ran once; the agent has its outcome.';
      send(x.res, 200, [whoAmI(s), message(after?.status === 'failed' ? 'notice' : 'ok', text), inboxLink()]);
    }),
  ]);

  router.add('POST', '/approvals/calls/:id/deny', [
    ...signedIn,
    step('deny', async (x) => {
      const s = need(x.session, 'session');
      const r = await found(x, s);
      if (!r) return;
      const reason = displayText((need(x.form, 'form').get('reason') ?? '').slice(0, 500), 'reason');
      const by = { actor: s.userId, authMethod: s.authMethod, ...(reason ? { reason } : {}) };
      if (!(await denyPerCall(ctx, r, by))) {
        notFound(x, s);
        return;
      }
      send(x.res, 200, [
        whoAmI(s),
        message('ok', 'Denied. Nothing was executed; the agent is told the call was denied.'),
        inboxLink(),
      ]);
    }),
  ]);
}
